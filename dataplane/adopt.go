package dataplane

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// Adoption says what a lispd took over from the lispd before it.
type Adoption struct {
	From   string    `json:"from"`   // the version of lispd that pinned the data plane
	Pinned time.Time `json:"pinned"` // when
	// Maps were taken as they were; Copied were copied into maps of
	// another size (map-cache.max-entries) or counter list; Refused
	// started empty, each with the reason.
	Maps    []string          `json:"maps,omitempty"`
	Copied  []string          `json:"copied,omitempty"`
	Refused map[string]string `json:"refused,omitempty"`
	// Links are the interfaces whose program was replaced in place;
	// Detached those no longer configured.
	Links    int `json:"links"`
	Detached int `json:"detached,omitempty"`
	// Entries are the map-cache entries the data plane went on with.
	Entries int `json:"map_cache_entries"`
}

// configMaps are filled from the configuration at each start: they are
// never adopted.
var configMaps = []string{".rodata", "rlocs", "egress_ifs"}

// subflowMaps go together: a subflow names its connection, a connection
// is found by its tokens, a hint is stamped with the epoch in .data.
var subflowMaps = []string{"subflows", "conns", "tokens", "subflow_hints", ".data"}

// previous is what the lispd before this one left pinned.
type previous struct {
	manifest *manifest
	maps     map[string]*ebpf.Map // by the programs' names (".data")
	links    map[string]link.Link // by pin name (linkPin)
	adoption *Adoption
}

// loadPrevious opens what the pin directory holds. A manifest it cannot
// read or one from another network namespace leaves nothing to adopt;
// the links of this namespace are still taken, to replace their
// programs in place.
func loadPrevious(p *pinDir) *previous {
	prev := &previous{maps: map[string]*ebpf.Map{}, links: map[string]link.Link{}, adoption: &Adoption{Refused: map[string]string{}}}
	entries, _ := os.ReadDir(p.path)
	if len(entries) == 0 {
		return nil
	}
	mf, err := p.readManifest()
	switch {
	case err != nil:
		prev.adoption.Refused["*"] = err.Error()
	case mf.Netns != 0 && p.netns != 0 && mf.Netns != p.netns:
		// A namespace of the same name that is gone: its links
		// went with its interfaces.
		prev.adoption.Refused["*"] = "pinned in another network namespace of the same name"
		return prev
	default:
		prev.manifest = mf
		prev.adoption.From, prev.adoption.Pinned = mf.Lispd, mf.Pinned
		for name := range mf.Maps {
			m, err := ebpf.LoadPinnedMap(p.file(name), nil)
			if err != nil {
				prev.adoption.Refused[name] = err.Error()
				continue
			}
			prev.maps[name] = m
		}
	}
	for _, e := range entries {
		if !isLinkPin(e.Name()) {
			continue
		}
		l, err := link.LoadPinnedLink(p.file(e.Name()), nil)
		if err != nil {
			continue
		}
		if linkPin(l) != e.Name() {
			l.Close() // its interface is gone: the link is no use
			continue
		}
		prev.links[e.Name()] = l
	}
	return prev
}

// The pins of the links: a TCX link's is "link-" and its interface's
// index, an XDP link's "xdp-" and the index.
const (
	tcxPin = "link-"
	xdpPin = "xdp-"
)

func isLinkPin(name string) bool {
	return strings.HasPrefix(name, tcxPin) || strings.HasPrefix(name, xdpPin)
}

// linkPin is the name a link is pinned by, from what the kernel says of
// it: "" for a link whose interface is gone.
func linkPin(l link.Link) string {
	info, err := l.Info()
	if err != nil {
		return ""
	}
	if tcx := info.TCX(); tcx != nil && tcx.Ifindex != 0 {
		return tcxPin + strconv.Itoa(int(tcx.Ifindex))
	}
	if xdp := info.XDP(); xdp != nil && xdp.Ifindex != 0 {
		return xdpPin + strconv.Itoa(int(xdp.Ifindex))
	}
	return ""
}

// close releases what was not taken.
func (prev *previous) close() {
	if prev == nil {
		return
	}
	for _, m := range prev.maps {
		m.Close()
	}
	for _, l := range prev.links {
		l.Close()
	}
}

// takeLink hands over the pinned link of that pin name, or nil.
func (prev *previous) takeLink(pin string) link.Link {
	if prev == nil {
		return nil
	}
	l := prev.links[pin]
	delete(prev.links, pin)
	return l
}

// detachRest detaches the programs of the interfaces no longer
// configured: their links lose their pins and their last descriptor.
func (prev *previous) detachRest() int {
	if prev == nil {
		return 0
	}
	n := 0
	for pin, l := range prev.links {
		l.Unpin()
		l.Close()
		delete(prev.links, pin)
		n++
	}
	return n
}

// plan decides, for each map of spec that holds state, whether the
// pinned map of the same name is taken as it is (replacements), copied
// into a new one (copies) or refused, and records it in the adoption.
func (prev *previous) plan(spec *ebpf.CollectionSpec) (replacements, copies map[string]*ebpf.Map) {
	replacements, copies = map[string]*ebpf.Map{}, map[string]*ebpf.Map{}
	if prev == nil || prev.manifest == nil {
		return
	}
	a := prev.adoption
	for _, name := range slices.Sorted(mapsOf(spec)) {
		old := prev.maps[name]
		if old == nil {
			continue // new in this version, or refused above
		}
		ms := spec.Maps[name]
		if prev.manifest.Maps[name] != layoutOf(ms) || old.Type() != ms.Type || old.KeySize() != ms.KeySize || old.ValueSize() != ms.ValueSize {
			a.Refused[name] = "its layout changed"
			continue
		}
		fits := compatible(ms, old) == nil
		if name == "counters" && !slices.Equal(prev.manifest.Counters, counterNames) {
			fits = false // copied by name
		}
		switch {
		case fits:
			replacements[name] = old
		case copyable(name, old):
			copies[name] = old
		default:
			a.Refused[name] = fmt.Sprintf("its size changed (%v)", compatible(ms, old))
		}
	}
	// The subflow table is adopted whole or not at all.
	for _, name := range subflowMaps {
		if why, ok := a.Refused[name]; ok {
			for _, other := range subflowMaps {
				if other != name && (replacements[other] != nil || copies[other] != nil) {
					delete(replacements, other)
					delete(copies, other)
					a.Refused[other] = fmt.Sprintf("goes with %s, which %s", name, why)
				}
			}
		}
	}
	for name := range replacements {
		a.Maps = append(a.Maps, name)
	}
	for name := range copies {
		a.Copied = append(a.Copied, name)
	}
	slices.Sort(a.Maps)
	slices.Sort(a.Copied)
	return
}

// stateMaps are the programs' maps that hold state, by name, with their
// layouts.
func stateMaps() map[string]string {
	spec, err := loadLisp()
	if err != nil {
		return nil
	}
	out := map[string]string{}
	for name := range mapsOf(spec) {
		out[name] = layoutOf(spec.Maps[name])
	}
	return out
}

// mapsOf are the names of spec's maps that hold state.
func mapsOf(spec *ebpf.CollectionSpec) func(func(string) bool) {
	return func(yield func(string) bool) {
		for name := range spec.Maps {
			if !slices.Contains(configMaps, name) && !yield(name) {
				return
			}
		}
	}
}

// compatible is ebpf.MapSpec.Compatible for a map of this kernel: the
// loader makes global data sections mmapable where the kernel can.
func compatible(ms *ebpf.MapSpec, m *ebpf.Map) error {
	if strings.HasPrefix(ms.Name, ".") {
		ms = ms.Copy()
		ms.Flags |= m.Flags() & unix.BPF_F_MMAPABLE
	}
	return ms.Compatible(m)
}

// copyable says whether a pinned map's entries can be copied into a new
// map of the same layout: not a ring buffer's, nor per-CPU values but the
// counters', which are copied by name.
func copyable(name string, m *ebpf.Map) bool {
	switch m.Type() {
	case ebpf.Hash, ebpf.LRUHash, ebpf.LPMTrie, ebpf.Array:
		return true
	case ebpf.PerCPUArray:
		return name == "counters"
	}
	return false
}

// copyEntries copies every entry of from into to, as bytes: the maps are
// of the same layout. Entries that do not fit a smaller map are lost.
func copyEntries(from, to *ebpf.Map) error {
	k, v := make([]byte, from.KeySize()), make([]byte, from.ValueSize())
	it := from.Iterate()
	for it.Next(&k, &v) {
		if err := to.Update(k, v, ebpf.UpdateAny); err != nil && !errors.Is(err, unix.E2BIG) && !errors.Is(err, unix.ENOSPC) {
			return err
		}
	}
	return it.Err()
}

// counterCopy carries the counters of a pinned counters map over by
// name, once before the programs are swapped and once more for what the
// old programs counted until then.
type counterCopy struct {
	from, to *ebpf.Map
	names    []string   // of from's indexes
	last     [][]uint64 // from's values at the last copy, by index
}

func (c *counterCopy) copy() error {
	if c.last == nil {
		c.last = make([][]uint64, len(c.names))
	}
	for i, name := range c.names {
		j := slices.Index(counterNames, name)
		var now []uint64
		if err := c.from.Lookup(uint32(i), &now); err != nil {
			return err
		}
		if j >= 0 {
			var cur []uint64
			if err := c.to.Lookup(uint32(j), &cur); err != nil {
				return err
			}
			for cpu := range min(len(cur), len(now)) {
				var before uint64
				if c.last[i] != nil {
					before = c.last[i][cpu]
				}
				cur[cpu] += now[cpu] - before
			}
			if err := c.to.Update(uint32(j), cur, ebpf.UpdateExist); err != nil {
				return err
			}
		}
		c.last[i] = now
	}
	return nil
}

// keptMaps are the loaded maps that hold state, by the programs' names:
// what is pinned for the next lispd.
func (o *objects) keptMaps() map[string]*ebpf.Map {
	out := map[string]*ebpf.Map{".data": o.Data}
	v := reflect.ValueOf(o.lispMaps)
	for i := range v.NumField() {
		name := v.Type().Field(i).Tag.Get("ebpf")
		if m, ok := v.Field(i).Interface().(*ebpf.Map); ok && m != nil && !slices.Contains(configMaps, name) {
			out[name] = m
		}
	}
	return out
}
