package pm

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/vishvananda/netlink"
	vns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/amptcp/amptcp/mptcp"
)

// openSystem opens, in the calling thread's namespace, the real
// dependencies that Deps leaves nil, and returns what closes them.
func (d *Daemon) openSystem() (closeAll func(), err error) {
	var closers []func()
	closeAll = func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	defer func() {
		if err != nil {
			closeAll()
		}
	}()
	deps := &d.deps
	if deps.Kernel == nil {
		c, err := mptcp.Dial()
		if err != nil {
			return nil, fmt.Errorf("pm: %w", err)
		}
		closers = append(closers, func() { c.Close() })
		deps.Kernel = c
	}
	if deps.Events == nil {
		l, err := mptcp.ListenEvents()
		if err != nil {
			return nil, fmt.Errorf("pm: %w", err)
		}
		deps.Events = l
	}
	if deps.Diag == nil {
		deps.Diag = sockDiag{}
	}
	if deps.PathManager == nil {
		deps.PathManager = sysctlPM{}
	}
	if deps.Links == nil {
		links, stop, err := subscribeLinks(d.log)
		if err != nil {
			return nil, fmt.Errorf("pm: rtnetlink: %w", err)
		}
		closers = append(closers, stop)
		deps.Links = links
	}
	if deps.LocalAddrs == nil {
		deps.LocalAddrs = usableAddrs
	}
	if deps.PortRange == nil {
		deps.PortRange = ephemeralPorts
	}
	if deps.Mapper == nil && (d.cfg.Policy == PolicyAMPTCP || d.cfg.Policy == PolicyBinder && d.cfg.AMPTCP != nil) {
		m, err := NewLigMapper(d.cfg.AMPTCP)
		if err != nil {
			return nil, fmt.Errorf("pm: %w", err)
		}
		deps.Mapper = m
	}
	return closeAll, nil
}

// sockDiag reads the connections and subflows with mptcp's sock_diag.
type sockDiag struct{}

func (sockDiag) Connections() ([]ConnInfo, error) {
	cs, err := mptcp.Connections()
	if err != nil {
		return nil, err
	}
	out := make([]ConnInfo, len(cs))
	for i, c := range cs {
		out[i] = ConnInfo{Token: c.Token, Local: unmap(c.Local), Remote: unmap(c.Remote), State: c.State,
			Listener: c.Listener, Bytes: c.Info.BytesSent + c.Info.BytesReceived}
	}
	return out, nil
}

func (sockDiag) Subflows() ([]SubflowInfo, error) {
	subs, err := mptcp.Subflows()
	if err != nil {
		return nil, err
	}
	out := make([]SubflowInfo, len(subs))
	for i, s := range subs {
		out[i] = SubflowInfo{Token: s.Token, Local: unmap(s.Local), Remote: unmap(s.Remote),
			LocalID: s.LocalID, RemoteID: s.RemoteID, State: s.State, BytesAcked: s.TCP.BytesAcked,
			Retransmits: s.TCP.Retransmits, Backoff: s.TCP.Backoff, RTT: s.TCP.RTT}
	}
	return out, nil
}

func unmap(ap netip.AddrPort) netip.AddrPort { return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()) }

// sysctlPM is net.mptcp.path_manager of the calling thread's namespace.
type sysctlPM struct{}

func (sysctlPM) PathManager() (string, error)     { return mptcp.PathManager() }
func (sysctlPM) SetPathManager(name string) error { return mptcp.SetPathManager(name) }

// subscribeLinks reports, on the channel, links that start running and
// addresses that are added in the calling thread's namespace: a path that
// may be back. Before it reports a link, it forgets the link's neighbours
// that were not resolved (forgetUnresolved).
func subscribeLinks(log interface{ Warn(string, ...any) }) (<-chan struct{}, func(), error) {
	neigh, err := netlink.NewHandle() // of the calling thread's namespace, used from another
	if err != nil {
		return nil, nil, err
	}
	done := make(chan struct{})
	linkCh := make(chan netlink.LinkUpdate, 64)
	addrCh := make(chan netlink.AddrUpdate, 64)
	onErr := func(err error) {
		select {
		case <-done: // closing the sockets fails their reads
		default:
			log.Warn("rtnetlink subscription", "error", err)
		}
	}
	if err := netlink.LinkSubscribeWithOptions(linkCh, done, netlink.LinkSubscribeOptions{ErrorCallback: onErr}); err != nil {
		neigh.Close()
		return nil, nil, err
	}
	if err := netlink.AddrSubscribeWithOptions(addrCh, done, netlink.AddrSubscribeOptions{ErrorCallback: onErr}); err != nil {
		close(done)
		neigh.Close()
		return nil, nil, err
	}
	out := make(chan struct{}, 1)
	notify := func() {
		select {
		case out <- struct{}{}:
		default: // one pending notification says it all
		}
	}
	go func() {
		running := map[int32]bool{}
		// Until both subscriptions end (done closes their sockets), so
		// that their goroutines never block on a full channel.
		for linkCh != nil || addrCh != nil {
			select {
			case u, ok := <-linkCh:
				if !ok {
					linkCh = nil
					continue
				}
				up := u.IfInfomsg.Flags&unix.IFF_UP != 0 && u.IfInfomsg.Flags&unix.IFF_RUNNING != 0
				if up && !running[u.Index] {
					if err := forgetUnresolved(neigh, int(u.Index)); err != nil {
						log.Warn("forget unresolved neighbours", "link_index", u.Index, "error", err)
					}
					notify()
				}
				running[u.Index] = up
			case u, ok := <-addrCh:
				if !ok {
					addrCh = nil
					continue
				}
				if u.NewAddr {
					notify()
				}
			}
		}
	}()
	return out, func() { close(done); neigh.Close() }, nil
}

// forgetUnresolved deletes the neighbour entries of a link that are being
// resolved or failed to be. While the carrier was off, a packet to the
// gateway left an entry waiting for its retransmission timer, up to a
// second, before it asks again: a subflow created when the link comes
// back would wait in it. A new entry asks at once.
func forgetUnresolved(h *netlink.Handle, index int) error {
	neighs, err := h.NeighList(index, netlink.FAMILY_ALL)
	if err != nil {
		return err
	}
	var errs []error
	for _, n := range neighs {
		if n.State&(netlink.NUD_INCOMPLETE|netlink.NUD_FAILED) != 0 {
			if err := h.NeighDel(&n); err != nil && !errors.Is(err, unix.ENOENT) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// usableAddrs lists the global addresses of the links that are up in the
// calling thread's namespace: what subflows can start from.
func usableAddrs() ([]netip.Addr, error) {
	addrs, err := netlink.AddrList(nil, netlink.FAMILY_ALL)
	if err != nil {
		return nil, err
	}
	links := map[int]bool{}
	var out []netip.Addr
	for _, a := range addrs {
		ip, ok := netip.AddrFromSlice(a.IP)
		if !ok || a.Scope != unix.RT_SCOPE_UNIVERSE || ip.IsLoopback() || a.Flags&unix.IFA_F_TENTATIVE != 0 {
			continue
		}
		up, seen := links[a.LinkIndex]
		if !seen {
			l, err := netlink.LinkByIndex(a.LinkIndex)
			up = err == nil && l.Attrs().Flags&unix.IFF_UP != 0 && l.Attrs().OperState != netlink.OperDown
			links[a.LinkIndex] = up
		}
		if up {
			out = append(out, ip.Unmap())
		}
	}
	return out, nil
}

// ephemeralPorts reads net.ipv4.ip_local_port_range, which IPv6 uses too.
func ephemeralPorts() (lo, hi uint16, err error) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, 0, err
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0, 0, fmt.Errorf("ip_local_port_range: %q", b)
	}
	l, err1 := strconv.ParseUint(f[0], 10, 16)
	h, err2 := strconv.ParseUint(f[1], 10, 16)
	if err := errors.Join(err1, err2); err != nil || l > h {
		return 0, 0, fmt.Errorf("ip_local_port_range: %q", b)
	}
	return uint16(l), uint16(h), nil
}

// threadNamespace is the network namespace of the thread that opened it,
// for goroutines to enter: lookups open their sockets there.
type threadNamespace struct{ ns vns.NsHandle }

func currentNamespace() threadNamespace {
	ns, err := vns.Get()
	if err != nil {
		return threadNamespace{ns: vns.None()}
	}
	return threadNamespace{ns}
}

// enter moves the calling goroutine into the namespace, on a thread of
// its own that ends with the goroutine.
func (t threadNamespace) enter() {
	if !t.ns.IsOpen() {
		return
	}
	runtime.LockOSThread()
	cur, err := vns.Get()
	if err == nil {
		defer cur.Close()
		if cur.Equal(t.ns) {
			runtime.UnlockOSThread()
			return
		}
	}
	// The thread stays locked: it ends with the goroutine rather than go
	// back to the scheduler in another namespace.
	vns.Set(t.ns)
}

func (t threadNamespace) close() {
	if t.ns.IsOpen() {
		t.ns.Close()
	}
}
