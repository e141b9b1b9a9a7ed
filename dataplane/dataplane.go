package dataplane

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"

	"github.com/amptcp/amptcp/config"
	"github.com/amptcp/amptcp/internal/ethtool"
)

// Options are what the data plane takes from outside its own section of
// the configuration.
type Options struct {
	MapCacheEntries int           // map-cache.max-entries; 0: the default
	MissInterval    time.Duration // map-cache.miss-interval; 0: the default
	RTR             bool          // the rtr role runs: resolve EIDs packets transit for
	Log             *slog.Logger

	// loadBytesOnly makes the programs read headers with
	// bpf_skb_load_bytes, as they do when the headers are in paged
	// data, which BPF_PROG_TEST_RUN's packets never are.
	loadBytesOnly bool
}

// Dataplane is the loaded and attached eBPF data plane. Its methods are
// safe for concurrent use.
type Dataplane struct {
	cfg   *config.Dataplane
	log   *slog.Logger
	objs  objects
	links []attached
	rlocs []netip.Addr
	// gpePeers are the RLOCs that take LISP-GPE (lisp-gpe.peers).
	gpePeers []netip.Prefix
	gro      *groDevice // nil without GRO for LISP-GPE

	// completed: RLOC interfaces whose checksum offload is off.
	completed *completed
	pins      *pinDir           // held while running; nil when pinning is off or impossible
	pinErr    error             // why there are no pins
	pinned    bool              // the pins are this data plane's
	layouts   map[string]string // of the maps pinned, by name
	counters  *counterCopy      // counters copied from the lispd before, by name
	adoption  *Adoption         // nil when there was nothing to adopt
	stored    []StoredEntry     // the map-cache entries found at start

	misses      chan Miss
	hold        *holdDevice // the ITR's, nil unless miss: hold
	holdRTR     *holdDevice // the RTR's
	held        chan Held
	reader      *ringbuf.Reader
	events      chan SubflowEvent
	eventReader *ringbuf.Reader
	stop        chan struct{}
	wg          sync.WaitGroup
	closeErr    error
	once        sync.Once
}

// objects are the programs and maps as loaded, and the global data that
// holds state (the subflow hints' epoch), pinned with the maps.
type objects struct {
	lispObjects
	Data *ebpf.Map `ebpf:".data"`
}

func (o *objects) Close() error {
	return errors.Join(o.lispObjects.Close(), o.Data.Close())
}

// attached is a program's TCX or XDP link on an interface.
type attached struct {
	ifindex int
	pin     string // its pin's name (linkPin)
	link    link.Link
}

// New loads the programs and maps, attaches the ITR to cfg's EID
// interfaces and the ETR/RTR to its RLOC interfaces. When a lispd before
// it left the data plane pinned in cfg's pin-path, New takes over its
// maps (map-cache, subflow table, counters) as far as their layout
// allows and replaces the programs in its links, one atomic update per
// interface. Close detaches the programs; Keep leaves them for the next
// lispd. It needs CAP_BPF and CAP_NET_ADMIN.
func New(cfg *config.Dataplane, opts Options) (*Dataplane, error) {
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	eids, err := interfaces("dataplane.eid-interfaces", cfg.EIDInterfaces)
	if err != nil {
		return nil, err
	}
	underlay, err := interfaces("dataplane.rloc-interfaces", cfg.RLOCInterfaces)
	if err != nil {
		return nil, err
	}
	rlocs, egress, err := rlocsOf(underlay)
	if err != nil {
		return nil, err
	}
	if err := setGateways(egress, cfg.RLOCInterfaces, cfg.RLOCGateways); err != nil {
		return nil, err
	}
	d := &Dataplane{cfg: cfg, log: opts.Log, misses: make(chan Miss, 1024), held: make(chan Held, heldQueue),
		events: make(chan SubflowEvent, 1024), stop: make(chan struct{}), gpePeers: cfg.LISPGPE.PeerPrefixes()}
	if cfg.Miss == "hold" && len(eids) > 0 {
		if d.hold, err = openHoldDevice(cfg.InstanceID, false); err != nil {
			return nil, err
		}
	}
	if cfg.Miss == "hold" && opts.RTR {
		if d.holdRTR, err = openHoldDevice(0, true); err != nil {
			d.hold.close()
			return nil, err
		}
	}
	prev, err := d.openPins(cfg.PinPath)
	if err != nil {
		d.hold.close()
		d.holdRTR.close()
		return nil, err
	}
	defer prev.close()
	if err := d.load(cfg, opts, rlocs, egress, prev); err != nil {
		d.abort()
		return nil, err
	}
	if d.completed, err = completeChecksums(cfg.CompleteChecksums, prev != nil && prev.manifest != nil); err != nil {
		d.abort()
		return nil, err
	}
	if err := d.setRLOCs(rlocs, egress); err != nil {
		d.abort()
		return nil, err
	}
	if d.hold != nil {
		eids = append(eids, &net.Interface{Index: d.hold.ifindex, Name: d.hold.name})
	}
	for _, ifc := range eids {
		if err := d.attach(ifc, d.objs.Itr, prev); err != nil {
			d.abort()
			return nil, err
		}
	}
	if d.holdRTR != nil {
		underlay = append(underlay, &net.Interface{Index: d.holdRTR.ifindex, Name: d.holdRTR.name})
	}
	if err := d.setUpGRO(prev); err != nil {
		d.abort()
		return nil, err
	}
	for _, ifc := range underlay {
		if err := d.attach(ifc, d.objs.Underlay, prev); err != nil {
			d.abort()
			return nil, err
		}
		if slices.Contains(cfg.XDPInterfaces, ifc.Name) {
			if err := d.attach(ifc, d.objs.UnderlayXdp, prev); err != nil {
				d.abort()
				return nil, err
			}
			if on, err := ethtool.Get(ifc.Name, ethtool.GRO); err == nil && !on {
				d.log.Warn("GRO is off on an interface of xdp-interfaces: decapsulating in XDP gains nothing there (ethtool -K IF gro on)",
					"interface", ifc.Name)
			}
		}
	}
	if err := d.settle(prev); err != nil {
		d.abort()
		return nil, err
	}
	if d.reader, err = ringbuf.NewReader(d.objs.Misses); err != nil {
		d.abort()
		return nil, fmt.Errorf("dataplane: read misses: %w", err)
	}
	d.wg.Go(d.readMisses)
	for _, h := range []*holdDevice{d.hold, d.holdRTR} {
		if h != nil {
			d.wg.Go(func() {
				if err := h.read(d.held); err != nil {
					d.log.Warn("read held packets", "device", h.name, "error", err)
				}
			})
		}
	}
	if d.eventReader, err = ringbuf.NewReader(d.objs.SubflowEvents); err != nil {
		d.abort()
		return nil, fmt.Errorf("dataplane: read subflow events: %w", err)
	}
	d.wg.Go(d.readEvents)
	d.wg.Go(func() { d.sweepEvery(cfg.SubflowIdleTimeout.Duration) })
	d.log.Info("data plane attached", "eid_interfaces", cfg.EIDInterfaces, "rloc_interfaces", cfg.RLOCInterfaces,
		"rlocs", d.rlocs, "complete_checksums", cfg.CompleteChecksums, "xdp_interfaces", cfg.XDPInterfaces,
		"lisp_gpe_peers", cfg.LISPGPE.Peers, "gro", d.gro != nil)
	return d, nil
}

// interfaces looks the named interfaces up, naming the field of a
// missing one.
func interfaces(field string, names []string) ([]*net.Interface, error) {
	var ifcs []*net.Interface
	for i, name := range names {
		ifc, err := net.InterfaceByName(name)
		if err != nil {
			return nil, fmt.Errorf("%s[%d]: %s: no such interface", field, i, name)
		}
		ifcs = append(ifcs, ifc)
	}
	return ifcs, nil
}

// load sets the programs' settings (with the first RLOCs and RLOC
// interfaces) and the maps' sizes, and loads them into the kernel.
func (d *Dataplane) load(cfg *config.Dataplane, opts Options, rlocs []localRLOC, egress []lispEgressIf, prev *previous) error {
	spec, err := loadLisp()
	if err != nil {
		return fmt.Errorf("dataplane: %w", err)
	}
	miss := opts.MissInterval
	if miss <= 0 {
		miss = config.DefaultMissInterval
	}
	settings := map[string]any{
		"cfg_iid":              cfg.InstanceID,
		"cfg_port_sum":         flag(cfg.PathSelection == "port-sum"),
		"cfg_source_port_sum":  flag(cfg.SourceSelection == "port-sum"),
		"cfg_bind_subflows":    flag(cfg.MPTCPSubflows != "off"),
		"cfg_stateful":         flag(cfg.Stateful()),
		"cfg_previous_hop":     flag(cfg.PathID == "previous-hop"),
		"cfg_miss_native":      flag(cfg.Miss == "native-forward"),
		"cfg_clamp_mss":        flag(cfg.ClampMSS == nil || *cfg.ClampMSS),
		"cfg_rtr":              flag(opts.RTR),
		"cfg_direct_access":    flag(!opts.loadBytesOnly),
		"cfg_xdp":              flag(len(cfg.XDPInterfaces) > 0),
		"cfg_hold_ifindex":     uint32(0),
		"cfg_hold_rtr_ifindex": uint32(0),
		"cfg_miss_interval_ns": uint64(miss),
		"cfg_n_rlocs":          uint32(len(rlocs)),
		"cfg_n_egress":         uint32(len(egress)),
	}
	if d.hold != nil {
		settings["cfg_hold_ifindex"] = uint32(d.hold.ifindex)
	}
	if d.holdRTR != nil {
		settings["cfg_hold_rtr_ifindex"] = uint32(d.holdRTR.ifindex)
	}
	var first [fastRLOCs]lispRlocKey
	for i, r := range rlocs[:min(len(rlocs), fastRLOCs)] {
		first[i] = r.key
	}
	var firstEgress [fastEgress]lispEgressIf
	copy(firstEgress[:], egress)
	settings["cfg_rlocs"], settings["cfg_egress"] = first, firstEgress
	for name, v := range settings {
		if err := spec.Variables[name].Set(v); err != nil {
			return fmt.Errorf("dataplane: set %s: %w", name, err)
		}
	}
	if n := opts.MapCacheEntries; n > 0 {
		spec.Maps["mapcache4"].MaxEntries = uint32(n)
		spec.Maps["mapcache6"].MaxEntries = uint32(n)
	}
	return d.loadAdopting(spec, prev)
}

func flag(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

// A localRLOC is an address of an RLOC interface, which the ETR takes
// packets for.
type localRLOC struct {
	addr    netip.Addr
	key     lispRlocKey
	ifindex uint32
}

// rlocsOf reads the global addresses of the RLOC interfaces: our RLOCs,
// and for each interface the first of each family, the source of what
// leaves by it.
func rlocsOf(underlay []*net.Interface) ([]localRLOC, []lispEgressIf, error) {
	var (
		rlocs  []localRLOC
		egress []lispEgressIf
	)
	for _, ifc := range underlay {
		addrs, err := ifc.Addrs()
		if err != nil {
			return nil, nil, fmt.Errorf("dataplane: addresses of %s: %w", ifc.Name, err)
		}
		e := lispEgressIf{Ifindex: uint32(ifc.Index)}
		eg := &e.Eg
		eg.Mtu = uint16(min(ifc.MTU, 0xffff))
		for _, a := range addrs {
			ipn, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			ip, _ := netip.AddrFromSlice(ipn.IP)
			ip = ip.Unmap()
			if !ip.IsGlobalUnicast() {
				continue // link-local addresses are no RLOCs
			}
			rlocs = append(rlocs, localRLOC{ip, lispRlocKey{Family: family(ip), Addr: addrWords(ip)}, uint32(ifc.Index)})
			switch {
			case ip.Is4() && eg.Has4 == 0:
				eg.Src4, eg.Has4 = addrWords(ip).A[0], 1
			case ip.Is6() && eg.Has6 == 0:
				eg.Src6, eg.Has6 = addrWords(ip), 1
			}
		}
		if eg.Has4 == 0 && eg.Has6 == 0 {
			return nil, nil, fmt.Errorf("dataplane: RLOC interface %s has no global address", ifc.Name)
		}
		egress = append(egress, e)
	}
	return rlocs, egress, nil
}

// setGateways writes the gateway of each RLOC interface (egress is in
// the order of names) from the configuration's rloc-gateways.
func setGateways(egress []lispEgressIf, names []string, gateways map[string]string) error {
	for i, name := range names {
		gw, ok := gateways[name]
		if !ok {
			continue
		}
		a, err := netip.ParseAddr(gw)
		if err != nil {
			return fmt.Errorf("dataplane.rloc-gateways.%s: %w", name, err)
		}
		eg := &egress[i].Eg
		if a = a.Unmap(); a.Is4() {
			eg.Gw4 = addrWords(a).A[0]
		} else {
			eg.Gw6, eg.HasGw6 = addrWords(a), 1
		}
	}
	return nil
}

// setRLOCs puts every RLOC and RLOC interface in the maps that hold
// those beyond the programs' settings.
func (d *Dataplane) setRLOCs(rlocs []localRLOC, egress []lispEgressIf) error {
	for _, r := range rlocs {
		d.rlocs = append(d.rlocs, r.addr)
		if err := d.objs.Rlocs.Update(&r.key, &r.ifindex, ebpf.UpdateAny); err != nil {
			return fmt.Errorf("dataplane: add RLOC %s: %w", r.addr, err)
		}
	}
	for _, e := range egress {
		if err := d.objs.EgressIfs.Update(&e.Ifindex, &e.Eg, ebpf.UpdateAny); err != nil {
			return fmt.Errorf("dataplane: egress %d: %w", e.Ifindex, err)
		}
	}
	return nil
}

// setUpGRO opens the GRO device and puts gro_sink on its ingress, as
// lisp-gpe.gro says. Where the kernel cannot, it says so and goes on
// without: GRO saves CPU, nothing depends on it.
func (d *Dataplane) setUpGRO(prev *previous) error {
	if !d.cfg.LISPGPE.GROOn() {
		return removeGRO() // a lispd before may have left it
	}
	g, err := openGRO()
	if err != nil {
		d.log.Warn("no GRO for LISP-GPE: the ETR and the RTR take each packet of an underlay of MTU-sized frames alone",
			"error", err)
		return nil
	}
	if err := d.attach(g.ifc, d.objs.GroSink, prev); err != nil {
		if g.made {
			g.remove()
		} else {
			g.close()
		}
		return err
	}
	d.gro = g
	return nil
}

// attach puts prog on the interface's tc ingress with TCX (Linux 6.6),
// or, for an XDP program, in its driver: in the link the lispd before
// left there, atomically replacing its program, or in a new link.
func (d *Dataplane) attach(ifc *net.Interface, prog *ebpf.Program, prev *previous) error {
	pin := tcxPin + strconv.Itoa(ifc.Index)
	if prog.Type() == ebpf.XDP {
		pin = xdpPin + strconv.Itoa(ifc.Index)
	}
	if l := prev.takeLink(pin); l != nil {
		if err := l.Update(prog); err == nil {
			d.links = append(d.links, attached{ifc.Index, pin, l})
			prev.adoption.Links++
			return nil
		} else {
			d.log.Warn("cannot replace the program in place: attaching anew", "interface", ifc.Name, "error", err)
			l.Unpin()
			l.Close()
		}
	}
	var (
		l   link.Link
		err error
	)
	if prog.Type() == ebpf.XDP {
		l, err = link.AttachXDP(link.XDPOptions{Interface: ifc.Index, Program: prog, Flags: link.XDPDriverMode})
		if err != nil {
			return fmt.Errorf("dataplane: attach XDP to %s (dataplane.xdp-interfaces: its driver needs native XDP): %w", ifc.Name, err)
		}
	} else {
		l, err = link.AttachTCX(link.TCXOptions{Interface: ifc.Index, Program: prog, Attach: ebpf.AttachTCXIngress})
		if err != nil {
			return fmt.Errorf("dataplane: attach to %s (tcx needs Linux 6.6 or later): %w", ifc.Name, err)
		}
	}
	d.links = append(d.links, attached{ifc.Index, pin, l})
	return nil
}

// Put installs or replaces a map-cache entry.
func (d *Dataplane) Put(k Key, e Entry) error {
	v, err := d.entry(e)
	if err != nil {
		return fmt.Errorf("dataplane: %s in instance %d: %w", k.Prefix, k.InstanceID, err)
	}
	if k.Prefix.Addr().Is4() {
		return d.objs.Mapcache4.Update(key4(k), v, ebpf.UpdateAny)
	}
	return d.objs.Mapcache6.Update(key6(k), v, ebpf.UpdateAny)
}

// Delete removes a map-cache entry; removing an absent one is no error.
func (d *Dataplane) Delete(k Key) error {
	var err error
	if k.Prefix.Addr().Is4() {
		err = d.objs.Mapcache4.Delete(key4(k))
	} else {
		err = d.objs.Mapcache6.Delete(key6(k))
	}
	if errors.Is(err, ebpf.ErrKeyNotExist) {
		return nil
	}
	return err
}

// Misses delivers the EIDs packets found no entry for, at most one per
// EID per MissInterval. It is closed by Close.
func (d *Dataplane) Misses() <-chan Miss { return d.misses }

// heldQueue is how many held packets wait for the control plane to take
// them: more are dropped (and sent again by their hosts).
const heldQueue = 1024

// Held delivers, with miss: hold, the packets the ITR (and the RTR) had
// no entry for, for the control plane to hold until it has resolved
// their mapping and release them. It is closed by Close.
func (d *Dataplane) Held() <-chan Held { return d.held }

// Release sends held packets on, in order, each as the entry for its
// EID says: the control plane installs the entry first. With the entry
// of action Hold, which keeps new packets to the EID held meanwhile, the
// released ones take its paths before them.
func (d *Dataplane) Release(pkts []Held) error { return release(pkts) }

// LocalRLOCs are the addresses of the RLOC interfaces.
func (d *Dataplane) LocalRLOCs() []netip.Addr { return slices.Clone(d.rlocs) }

// Close detaches the programs and frees the maps: lispd stops for good.
// What was pinned goes too, and the RLOC interfaces get their checksum
// offload back.
func (d *Dataplane) Close() error {
	d.once.Do(func() {
		d.stopLoops()
		var errs []error
		if d.pins != nil {
			errs = append(errs, d.pins.remove())
		}
		for _, a := range d.links {
			errs = append(errs, a.link.Close())
		}
		if d.gro != nil {
			errs = append(errs, d.gro.remove())
		}
		errs = append(errs, d.objs.Close(), d.completed.restore())
		d.closeErr = errors.Join(errs...)
	})
	return d.closeErr
}

// Keep pins the data plane for the next lispd, which adopts it, and
// releases it: the programs go on forwarding with the maps as they are.
// Without pinning it fails and changes nothing: Close the data plane
// then.
func (d *Dataplane) Keep() error {
	if d.pins == nil {
		return fmt.Errorf("dataplane: cannot keep the data plane for a restart: %w", d.pinErr)
	}
	var err error
	d.once.Do(func() {
		d.stopLoops()
		if !d.pinned {
			err = d.pin()
		}
		if err != nil {
			d.pins.remove() // half a data plane must not be adopted
		} else {
			d.pins.unlock()
			d.log.Info("data plane pinned for the next lispd", "pin_path", d.pins.path)
		}
		for _, a := range d.links {
			a.link.Close() // pinned, it stays attached
		}
		if d.gro != nil {
			d.gro.close() // the device stays, for the next lispd
		}
		d.objs.Close()
		d.completed.release() // the next lispd turns the offload on at its stop for good
		d.closeErr = err
	})
	return err
}

// stopLoops stops reading misses and held packets and sweeping
// subflows; the hold device goes, with what it held.
func (d *Dataplane) stopLoops() {
	close(d.stop)
	if d.reader != nil {
		d.reader.Close()
	}
	d.hold.close()
	d.holdRTR.close()
	if d.eventReader != nil {
		d.eventReader.Close()
	}
	d.wg.Wait()
	close(d.misses)
	close(d.held)
	close(d.events)
}

// readMisses passes the ring buffer's misses on, dropping them when the
// control plane lags: the data plane reports them again.
func (d *Dataplane) readMisses() { readRing(d, "misses", d.reader, decodeMiss, d.misses) }

// readRing passes what a ring buffer holds on to out, decoded, until the
// reader is closed; what the control plane is too slow for is dropped.
func readRing[T any](d *Dataplane, what string, r *ringbuf.Reader, decode func([]byte) (T, bool), out chan<- T) {
	for {
		rec, err := r.Read()
		if err != nil {
			if !errors.Is(err, ringbuf.ErrClosed) {
				d.log.Warn("read "+what, "error", err)
			}
			return
		}
		v, ok := decode(rec.RawSample)
		if !ok {
			continue
		}
		select {
		case out <- v:
		default:
		}
	}
}
