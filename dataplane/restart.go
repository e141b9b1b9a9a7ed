package dataplane

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/cilium/ebpf"
)

// Pinning says where the data plane is kept across restarts.
type Pinning struct {
	// Path is the pin directory; empty when restarts cannot keep the
	// data plane, and Error says why.
	Path  string `json:"path,omitempty"`
	Error string `json:"error,omitempty"`
	// WhileRunning: the data plane is pinned all along (keep-on-exit),
	// not only for a restart.
	WhileRunning bool `json:"while_running"`
}

// Pinning says where the data plane is kept across restarts, or why it
// cannot be.
func (d *Dataplane) Pinning() Pinning {
	if d.pins == nil {
		return Pinning{Error: d.pinErr.Error()}
	}
	return Pinning{Path: d.pins.path, WhileRunning: d.cfg.KeepOnExit}
}

// Adoption says what the data plane took over from the lispd before, or
// nil.
func (d *Dataplane) Adoption() *Adoption { return d.adoption }

// StoredEntry is a map-cache entry as the data plane holds it: the
// control plane of a new lispd learns what it adopted from them.
type StoredEntry struct {
	Key    Key
	Action Action
	Paths  int
}

// Stored are the map-cache entries the data plane held when it started:
// those it adopted.
func (d *Dataplane) Stored() []StoredEntry { return slices.Clone(d.stored) }

// openPins opens the pin directory and what a lispd before left in it.
// Pinning that cannot be (no BPF file system there) only costs hitless
// restarts, and says so; a directory another lispd holds is an error.
func (d *Dataplane) openPins(configured string) (*previous, error) {
	path, err := PinPath(configured)
	if err == nil && path == "" {
		err = errors.New("dataplane.pin-path is off")
	}
	if err != nil {
		d.pinErr = err
		return nil, nil
	}
	p, err := openPinDir(path)
	if err != nil {
		if errors.Is(err, errInUse) {
			return nil, fmt.Errorf("dataplane.pin-path: %w", err)
		}
		d.pinErr = err
		d.log.Warn("restarts will not keep the data plane", "error", err)
		return nil, nil
	}
	d.pins = p
	return loadPrevious(p), nil
}

// loadAdopting loads the programs with the maps they adopt, falls back
// to new maps when the kernel refuses them, and copies the entries of
// the maps that are copied.
func (d *Dataplane) loadAdopting(spec *ebpf.CollectionSpec, prev *previous) error {
	d.layouts = map[string]string{}
	for name := range mapsOf(spec) {
		d.layouts[name] = layoutOf(spec.Maps[name]) // sizes set: as loaded
	}
	replacements, copies := prev.plan(spec)
	err := spec.LoadAndAssign(&d.objs, &ebpf.CollectionOptions{MapReplacements: replacements})
	if err != nil && len(replacements) > 0 && errors.Is(err, ebpf.ErrMapIncompatible) {
		// A pinned map that is not what its manifest says.
		d.log.Warn("the kernel refused the pinned maps: starting with new ones", "error", err)
		for _, name := range append(prev.adoption.Maps, prev.adoption.Copied...) {
			prev.adoption.Refused[name] = err.Error()
		}
		prev.adoption.Maps, prev.adoption.Copied, copies = nil, nil, nil
		err = spec.LoadAndAssign(&d.objs, nil)
	}
	if err != nil {
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return fmt.Errorf("dataplane: the kernel refused the programs: %+v", ve)
		}
		return fmt.Errorf("dataplane: load the programs: %w", err)
	}
	kept := d.objs.keptMaps()
	for _, name := range slices.Sorted(mapKeys(copies)) {
		if name == "counters" {
			d.counters = &counterCopy{from: copies[name], to: kept[name], names: prev.manifest.Counters}
			err = d.counters.copy()
		} else {
			err = copyEntries(copies[name], kept[name])
		}
		if err != nil {
			prev.adoption.Refused[name] = fmt.Sprintf("copy: %v", err)
			prev.adoption.Copied = slices.DeleteFunc(prev.adoption.Copied, func(s string) bool { return s == name })
		}
	}
	return nil
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// settle ends the takeover once every interface has its program: what
// the old programs counted meanwhile is carried over, the programs of
// interfaces no longer configured detached, the adopted map-cache
// listed; then the data plane is pinned at once if it is to outlive
// any exit (keep-on-exit), and the directory holds nothing otherwise.
func (d *Dataplane) settle(prev *previous) error {
	if prev != nil {
		a := prev.adoption
		if d.counters != nil {
			if err := d.counters.copy(); err != nil {
				d.log.Warn("carry the counters over", "error", err)
			}
			d.counters = nil
		}
		a.Detached = prev.detachRest()
		stored, err := d.storedEntries()
		if err != nil {
			return fmt.Errorf("dataplane: list the adopted map-cache: %w", err)
		}
		d.stored, a.Entries = stored, len(stored)
		if len(a.Refused) == 0 {
			a.Refused = nil
		}
		d.adoption = a
		d.log.Info("data plane adopted", "from", a.From, "pinned", a.Pinned, "maps", a.Maps, "copied", a.Copied,
			"links", a.Links, "detached", a.Detached, "map_cache_entries", a.Entries)
		for name, why := range a.Refused {
			d.log.Warn("pinned map not adopted: it starts empty", "map", name, "reason", why)
		}
	}
	if d.pins == nil {
		return nil
	}
	if d.cfg.KeepOnExit {
		return d.pin()
	}
	return d.unpin()
}

// pin pins the maps, the links and, last, the manifest: a directory
// without one holds nothing to adopt.
func (d *Dataplane) pin() error {
	if err := d.unpin(); err != nil {
		return err
	}
	p := d.pins
	for name, m := range d.objs.keptMaps() {
		if err := m.Pin(p.file(name)); err != nil {
			return fmt.Errorf("dataplane: pin map %s: %w", name, err)
		}
	}
	for _, a := range d.links {
		if err := a.link.Pin(p.file(a.pin)); err != nil {
			return fmt.Errorf("dataplane: pin the link of interface %d: %w", a.ifindex, err)
		}
	}
	if err := p.writeManifest(p.newManifest(d.layouts)); err != nil {
		return fmt.Errorf("dataplane: %w", err)
	}
	d.pinned = true
	return nil
}

// unpin empties the pin directory: the manifest first, then this data
// plane's pins, then what else is there (what the lispd before left).
func (d *Dataplane) unpin() error {
	var errs []error
	for _, m := range d.objs.keptMaps() {
		errs = append(errs, m.Unpin())
	}
	for _, a := range d.links {
		errs = append(errs, a.link.Unpin())
	}
	errs = append(errs, d.pins.clear())
	d.pinned = false
	return errors.Join(errs...)
}

// storedEntries lists the map-cache entries the data plane holds.
func (d *Dataplane) storedEntries() ([]StoredEntry, error) {
	var out []StoredEntry
	var (
		k4 lispMcKey4
		k6 lispMcKey6
		v  lispMcEntry
	)
	it := d.objs.Mapcache4.Iterate()
	for it.Next(&k4, &v) {
		a := wordsAddr(afInet, addr{A: [4]uint32{k4.Addr}})
		out = append(out, StoredEntry{Key{be32(k4.Iid), netip.PrefixFrom(a, int(k4.Prefixlen)-32)}, Action(v.Action), int(v.N_paths)})
	}
	if err := it.Err(); err != nil {
		return nil, err
	}
	it = d.objs.Mapcache6.Iterate()
	for it.Next(&k6, &v) {
		a := wordsAddr(afInet6, addr{A: k6.Addr})
		out = append(out, StoredEntry{Key{be32(k6.Iid), netip.PrefixFrom(a, int(k6.Prefixlen)-32)}, Action(v.Action), int(v.N_paths)})
	}
	return out, it.Err()
}

// abort releases what a New that failed took: the links it attached
// detach, the pins (and what the lispd before left forwarding) stay.
func (d *Dataplane) abort() {
	d.once.Do(func() {
		d.stopLoops()
		for _, a := range d.links {
			a.link.Close()
		}
		if d.gro != nil && d.gro.made {
			d.gro.remove()
		} else if d.gro != nil {
			d.gro.close()
		}
		d.objs.Close()
		d.completed.abort()
		if d.pins != nil {
			d.pins.unlock()
		}
		d.closeErr = errors.New("dataplane: not started")
	})
}
