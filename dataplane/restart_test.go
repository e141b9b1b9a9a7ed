package dataplane

import (
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/amptcp/amptcp/config"
	"github.com/amptcp/amptcp/internal/testenv"
)

// testPins is a pin path on a BPF file system of the test's own.
func testPins(t *testing.T) string { return filepath.Join(testenv.BPFFS(t), "lispd") }

// restart starts a new data plane with cfg in the rig's namespace, as a
// new lispd does after the rig's was kept.
func (r *rig) restart(cfg config.Dataplane, opts ...Options) (*Dataplane, error) {
	cfg.EIDInterfaces, cfg.RLOCInterfaces = []string{"eid0"}, []string{"rloc0"}
	withDefaults(&cfg)
	var dp *Dataplane
	err := r.ns.Do(func() (err error) {
		dp, err = New(&cfg, append(opts, Options{})[0])
		return err
	})
	if err == nil {
		r.dp = dp // the rig's cleanup closes it
	}
	return dp, err
}

// keep keeps the rig's data plane, pinned at pins, and rewrites its
// manifest with change, as another lispd would have written it.
func (r *rig) keep(pins string, change func(*manifest)) *pinDir {
	r.t.Helper()
	if err := r.dp.Keep(); err != nil {
		r.t.Fatal(err)
	}
	p := &pinDir{path: pins, lock: -1}
	mf, err := p.readManifest()
	if err != nil {
		r.t.Fatal(err)
	}
	change(mf)
	if err := p.writeManifest(*mf); err != nil {
		r.t.Fatal(err)
	}
	return p
}

// attachedTo lists the IDs of the links and programs on an interface's
// tc ingress.
func (r *rig) attachedTo(ifindex int) (links []link.ID, progs []ebpf.ProgramID) {
	r.t.Helper()
	var res *link.QueryResult
	err := r.ns.Do(func() (err error) {
		res, err = link.QueryPrograms(link.QueryOptions{Target: ifindex, Attach: ebpf.AttachTCXIngress})
		return err
	})
	if err != nil {
		r.t.Fatal(err)
	}
	for _, p := range res.Programs {
		id, _ := p.LinkID()
		links, progs = append(links, id), append(progs, p.ID)
	}
	return links, progs
}

// A restart keeps the data plane: the old programs forward until the new
// ones replace them in the same links; the map-cache, the subflows on
// their paths and the counters carry on; nothing stays pinned while the
// new data plane runs, and a stop for good detaches everything.
func TestRestartAdoptsTheDataPlane(t *testing.T) {
	pins := testPins(t)
	r := newRig(t, config.Dataplane{PinPath: pins}, Options{})
	r.put("10.2.0.0/16", twoPaths(true))
	first := r.sendTCP(port(40000), tcpSeg{flags: syn, options: mpCapableSYN()})
	r.itrTCP(port(40000), tcpSeg{flags: ack, options: mpCapableACK(clientKey, serverKey)})
	second := r.sendTCP(port(40001), tcpSeg{flags: syn, options: mpJoinSYN(token(serverKey))})
	r.advanceEpoch(1) // an epoch the new programs do not start with
	for p := range uint16(2) {
		r.sendTCP(port(40000+p), tcpSeg{flags: ack, seq: 1, payload: []byte{1}}) // hints of the new epoch
	}
	before, subsBefore := r.counters(), r.subflows()
	linksBefore, progsBefore := r.attachedTo(r.eid)
	if entries, _ := os.ReadDir(pins); len(entries) != 0 {
		t.Errorf("pinned while running without keep-on-exit: %v", entries)
	}

	if err := r.dp.Keep(); err != nil {
		t.Fatal(err)
	}
	// Until a new lispd comes, the old programs forward.
	if links, progs := r.attachedTo(r.eid); !slices.Equal(links, linksBefore) || !slices.Equal(progs, progsBefore) {
		t.Errorf("after Keep: links %v programs %v, before %v %v", links, progs, linksBefore, progsBefore)
	}
	for _, name := range []string{"manifest", "mapcache4", "subflows", "counters", "data", "misses", "link-" + strconv.Itoa(r.eid)} {
		if _, err := os.Stat(filepath.Join(pins, name)); err != nil {
			t.Errorf("not pinned: %v", err)
		}
	}

	dp, err := r.restart(config.Dataplane{PinPath: pins})
	if err != nil {
		t.Fatal(err)
	}
	a := dp.Adoption()
	// The links of the EID and RLOC interfaces and of the GRO device.
	if a == nil || a.Links != 3 || len(a.Refused) != 0 || a.Entries != 1 ||
		!slices.Contains(a.Maps, "mapcache4") || !slices.Contains(a.Maps, "subflows") || !slices.Contains(a.Maps, ".data") {
		t.Fatalf("adoption %+v", a)
	}
	if s := dp.Stored(); len(s) != 1 || s[0].Key.Prefix != netip.MustParsePrefix("10.2.0.0/16") || s[0].Paths != 2 {
		t.Errorf("stored map-cache %+v", s)
	}
	// The same links, with the new program in them.
	links, progs := r.attachedTo(r.eid)
	if !slices.Equal(links, linksBefore) || len(progs) != 1 || progs[0] == progsBefore[0] || progs[0] != programID(t, dp.objs.Itr) {
		t.Errorf("after the restart: links %v programs %v, before %v %v", links, progs, linksBefore, progsBefore)
	}
	if entries, _ := os.ReadDir(pins); len(entries) != 0 {
		t.Errorf("left pinned after the adoption: %v", entries)
	}
	// Each subflow keeps its path, and the counters go on from where
	// they were.
	if got := r.sendTCP(port(40000), tcpSeg{flags: ack, seq: 2, payload: []byte{2}}); got != first {
		t.Errorf("the first subflow went to %s after the restart, before to %s", got, first)
	}
	if got := r.sendTCP(port(40001), tcpSeg{flags: ack, seq: 2, payload: []byte{2}}); got != second {
		t.Errorf("the second subflow went to %s after the restart, before to %s", got, second)
	}
	after, subsAfter := r.counters(), r.subflows()
	if after["itr_encapsulated"] != before["itr_encapsulated"]+2 || after["subflow_join"] != before["subflow_join"] {
		t.Errorf("counters before %v, after %v", nonZero(before), nonZero(after))
	}
	if len(subsAfter) != 2 || subsAfter[0].Connection != subsBefore[0].Connection || subsAfter[1].Packets != subsBefore[1].Packets+1 {
		t.Errorf("subflows before %+v, after %+v", subsBefore, subsAfter)
	}

	// Stopping for good detaches the programs and leaves nothing pinned.
	if err := dp.Close(); err != nil {
		t.Fatal(err)
	}
	r.waitDetached(r.eid)
	if _, err := os.Stat(pins); !os.IsNotExist(err) {
		t.Errorf("the pin directory is still there: %v", err)
	}
}

// A map whose layout is not the programs' is not adopted: a lispd of
// another version wrote it. The data plane says so, starts that map (and
// the maps that go with it) empty, adopts the others, and still replaces
// the programs in place.
func TestRestartRefusesIncompatibleMaps(t *testing.T) {
	pins := testPins(t)
	r := newRig(t, config.Dataplane{PinPath: pins}, Options{})
	r.put("10.2.0.0/16", twoPaths(true))
	r.sendTCP(port(40000), tcpSeg{flags: syn, options: mpCapableSYN()})
	before := r.counters()
	// An older lispd's subflow table, and a map-cache of other entries
	// under the name of this one's.
	p := r.keep(pins, func(mf *manifest) { mf.Maps["subflows"] = "0123456789abcdef" })
	other, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.LPMTrie, KeySize: 12, ValueSize: 64, MaxEntries: 16, Flags: unix.BPF_F_NO_PREALLOC})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	os.Remove(p.file("mapcache4"))
	if err := other.Pin(p.file("mapcache4")); err != nil {
		t.Fatal(err)
	}
	_, progsBefore := r.attachedTo(r.eid)

	dp, err := r.restart(config.Dataplane{PinPath: pins})
	if err != nil {
		t.Fatal(err)
	}
	a := dp.Adoption()
	for _, name := range []string{"subflows", "conns", "tokens", "subflow_hints", ".data", "mapcache4"} {
		if a.Refused[name] == "" || slices.Contains(a.Maps, name) {
			t.Errorf("%s adopted: %+v", name, a)
		}
	}
	if !strings.Contains(a.Refused["subflows"], "layout changed") || !slices.Contains(a.Maps, "counters") || a.Links != 3 || a.Entries != 0 {
		t.Errorf("adoption %+v", a)
	}
	if _, progs := r.attachedTo(r.eid); len(progs) != 1 || progs[0] == progsBefore[0] {
		t.Errorf("programs %v, before %v", progs, progsBefore)
	}
	// The new map-cache works, the counters went on.
	r.put("10.2.0.0/16", twoPaths(true))
	r.sendTCP(port(40001), tcpSeg{flags: syn})
	if after := r.counters(); after["itr_encapsulated"] != before["itr_encapsulated"]+1 {
		t.Errorf("counters before %v, after %v", nonZero(before), nonZero(after))
	}
}

// A map-cache of another size (map-cache.max-entries) gets the entries
// of the one before, copied.
func TestRestartResizesTheMapCache(t *testing.T) {
	pins := testPins(t)
	r := newRig(t, config.Dataplane{PinPath: pins}, Options{})
	r.put("10.2.0.0/16", twoPaths(true))
	if err := r.dp.Keep(); err != nil {
		t.Fatal(err)
	}
	dp, err := r.restart(config.Dataplane{PinPath: pins}, Options{MapCacheEntries: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if a := dp.Adoption(); !slices.Equal(a.Copied, []string{"mapcache4", "mapcache6"}) || a.Entries != 1 || len(a.Refused) != 0 {
		t.Errorf("adoption %+v", a)
	}
	if dp.objs.Mapcache4.MaxEntries() != 1000 {
		t.Errorf("map-cache of %d entries", dp.objs.Mapcache4.MaxEntries())
	}
	if got := r.sendTCP(port(40000), tcpSeg{flags: syn}); got != rlocA && got != rlocB {
		t.Errorf("sent to %s", got)
	}
}

// A manifest that is no lispd's leaves nothing to adopt, but the links
// are still taken over: never two programs on one interface.
func TestRestartWithoutAManifest(t *testing.T) {
	pins := testPins(t)
	r := newRig(t, config.Dataplane{PinPath: pins}, Options{})
	r.keep(pins, func(mf *manifest) { mf.Format = 99 })
	dp, err := r.restart(config.Dataplane{PinPath: pins})
	if err != nil {
		t.Fatal(err)
	}
	if a := dp.Adoption(); a == nil || len(a.Maps) != 0 || !strings.Contains(a.Refused["*"], "format 99") || a.Links != 3 {
		t.Errorf("adoption %+v", a)
	}
	if links, progs := r.attachedTo(r.rloc); len(links) != 1 || progs[0] != programID(t, dp.objs.Underlay) {
		t.Errorf("links %v programs %v", links, progs)
	}
}

// With keep-on-exit the data plane is pinned while it runs, so that it
// outlives lispd however it ends; a second data plane on the same pin
// path is refused; RemovePinned is the stop for good after the fact.
func TestKeepOnExit(t *testing.T) {
	pins := testPins(t)
	r := newRig(t, config.Dataplane{PinPath: pins, KeepOnExit: true}, Options{})
	if _, err := os.Stat(filepath.Join(pins, "manifest")); err != nil {
		t.Errorf("not pinned while running: %v", err)
	}
	if got := r.dp.Pinning(); got.Path != pins || !got.WhileRunning {
		t.Errorf("pinning %+v", got)
	}
	if _, err := r.restart(config.Dataplane{PinPath: pins}); err == nil || !strings.Contains(err.Error(), "in use by another lispd") {
		t.Errorf("a second data plane on the same pin path: %v", err)
	}
	if err := r.dp.Keep(); err != nil {
		t.Fatal(err)
	}
	if links, _ := r.attachedTo(r.eid); len(links) != 1 {
		t.Errorf("links after Keep: %v", links)
	}
	if found, err := RemovePinned(pins); !found || err != nil {
		t.Fatalf("RemovePinned: %v, %v", found, err)
	}
	r.waitDetached(r.eid)
	if found, err := RemovePinned(pins); found || err != nil {
		t.Errorf("RemovePinned again: %v, %v", found, err)
	}
}

// The default pin path is named after the network namespace, so that
// the lispds of two namespaces never share one; where it is on no BPF
// file system, the data plane runs and says that restarts drop traffic.
func TestDefaultPinPath(t *testing.T) {
	r := newRig(t, config.Dataplane{PinPath: "off"}, Options{})
	var path string
	if err := r.ns.Do(func() (err error) { path, err = PinPath(""); return err }); err != nil {
		t.Fatal(err)
	}
	if want := PinRoot + "/lispd-" + r.ns.Name; path != want {
		t.Errorf("default pin path %q, want %q", path, want)
	}
	if p := r.dp.Pinning(); p.Path != "" || !strings.Contains(p.Error, "off") {
		t.Errorf("pinning %+v", p)
	}
	if err := r.dp.Keep(); err == nil {
		t.Error("Keep without pinning succeeded")
	}
}

// waitDetached waits until the interface has no program: the kernel
// frees a link whose last reference went in a work queue.
func (r *rig) waitDetached(ifindex int) {
	r.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		links, _ := r.attachedTo(ifindex)
		if len(links) == 0 {
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("still attached to interface %d: links %v", ifindex, links)
		}
	}
}

func programID(t *testing.T, p *ebpf.Program) ebpf.ProgramID {
	t.Helper()
	info, err := p.Info()
	if err != nil {
		t.Fatal(err)
	}
	id, _ := info.ID()
	return id
}

// Stopping for good removes the data plane's pins and no other file of
// the directory: pin-path may name one that holds more.
func TestStopLeavesOthersPins(t *testing.T) {
	pins := testPins(t)
	r := newRig(t, config.Dataplane{PinPath: pins, KeepOnExit: true}, Options{})
	other, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 4, MaxEntries: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := other.Pin(filepath.Join(pins, "someone_elses")); err != nil {
		t.Fatal(err)
	}
	if err := r.dp.Close(); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(pins)
	if len(entries) != 1 || entries[0].Name() != "someone_elses" {
		t.Errorf("left in the pin directory: %v", entries)
	}
	r.waitDetached(r.eid)
}

// Counters of a lispd with another list of counters are carried over by
// name: one it does not know is dropped, one it did not have starts at 0.
func TestRestartCarriesCountersByName(t *testing.T) {
	pins := testPins(t)
	r := newRig(t, config.Dataplane{PinPath: pins}, Options{})
	r.put("10.2.0.0/16", twoPaths(true))
	r.sendTCP(port(40000), tcpSeg{flags: syn})
	before := r.counters()
	// As an older lispd whose first two counters came in the other order
	// and which had no itr_link_local.
	r.keep(pins, func(mf *manifest) {
		names := slices.Clone(counterNames)
		names[0], names[1] = names[1], names[0]
		mf.Counters = slices.DeleteFunc(names, func(s string) bool { return s == "itr_link_local" })
	})
	dp, err := r.restart(config.Dataplane{PinPath: pins})
	if err != nil {
		t.Fatal(err)
	}
	if a := dp.Adoption(); !slices.Contains(a.Copied, "counters") || len(a.Refused) != 0 {
		t.Errorf("adoption %+v", a)
	}
	after := r.counters()
	// What the old map held at index 0 was, by the manifest's names,
	// itr_natively_forwarded: it lands there.
	if after["itr_natively_forwarded"] != before["itr_encapsulated"] || after["itr_encapsulated"] != before["itr_natively_forwarded"] ||
		after["subflow_new"] != before["subflow_new"] {
		t.Errorf("counters before %v, after %v", nonZero(before), nonZero(after))
	}
}
