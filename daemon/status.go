package daemon

import (
	"runtime"
	"time"

	"github.com/amptcp/amptcp/config"
	"github.com/amptcp/amptcp/control/mapcache"
	"github.com/amptcp/amptcp/control/mapserver"
	"github.com/amptcp/amptcp/control/pce"
	"github.com/amptcp/amptcp/control/probe"
	"github.com/amptcp/amptcp/control/resolver"
	"github.com/amptcp/amptcp/control/xtr"
	"github.com/amptcp/amptcp/internal/buildinfo"
	"github.com/amptcp/amptcp/lisp"
)

// Status is what `lispd status` shows.
type Status struct {
	Version   string            `json:"version"`
	Started   time.Time         `json:"started"`
	Roles     []config.Role     `json:"roles"`
	Listen    []string          `json:"listen"`
	Loops     int               `json:"loops"` // serving each listen address, one per CPU (-cpus)
	Counters  Counters          `json:"counters"`
	MapServer *mapserver.Status `json:"map_server,omitempty"`
	// DDTNode is the ddt-node role's delegations, DDTResolver the
	// map-resolver's DDT resolution (root, referral cache).
	DDTNode     []DelegationStatus  `json:"ddt_node,omitempty"`
	DDTResolver *resolver.DDTStatus `json:"ddt_resolver,omitempty"`
	// The tunnel roles: the xtr's mappings and registrations, the
	// map-cache, this router's row of the RTT matrix (every locator it
	// probes) and what the data plane says.
	XTR          *xtr.Status              `json:"xtr,omitempty"`
	Join         *xtr.JoinStatus          `json:"join,omitempty"`
	MapResolvers []mapcache.ResolverState `json:"map_resolvers,omitempty"`
	MapCache     []mapcache.Entry         `json:"map_cache,omitempty"`
	Probes       []probe.Locator          `json:"probes,omitempty"`
	Dataplane    *DataplaneStatus         `json:"dataplane,omitempty"`
	// LastReload is what the last configuration reload did.
	LastReload *Reload `json:"last_reload,omitempty"`
	// TE is the te role: the overlay's nodes, the RTT matrix, the sets
	// of ELPs and the destinations' path slots.
	TE *pce.Status `json:"te,omitempty"`
}

// Counters are the daemon's counters, by name: the control socket and
// the metrics endpoint both show them.
type Counters struct {
	// Received counts datagrams by message type; Unexpected those of a
	// type no running role takes; Malformed those that do not decode
	// (Map-Registers are counted among MapRegisters instead).
	Received   map[string]uint64 `json:"received"`
	Unexpected map[string]uint64 `json:"unexpected"`
	Malformed  uint64            `json:"malformed"`
	Oversized  uint64            `json:"oversized"`
	Sent       uint64            `json:"sent"`
	SendErrors uint64            `json:"send_errors"`
	Unroutable uint64            `json:"unroutable"`
	// ByLoop counts the datagrams each serving loop received, the loops
	// of each listen address in turn: how evenly the kernel spreads the
	// peers over them.
	ByLoop []uint64 `json:"by_loop"`

	// The map-server: Map-Registers by result ("accepted" or the reason
	// for refusing), Map-Notifies sent, EID-prefixes registered now and
	// ETR registrations expired.
	MapRegisters  map[string]uint64 `json:"map_registers,omitempty"`
	MapNotifies   uint64            `json:"map_notifies"`
	Registrations int               `json:"registrations"`
	Expired       uint64            `json:"expired"`
	// Unsolicited Map-Notifies to the ETRs of merged registrations
	// ("sent", "retransmitted", "unacknowledged": given up on), and the
	// Map-Notify-Acks by result.
	MergeNotifies map[string]uint64 `json:"merge_notifies,omitempty"`
	NotifyAcks    map[string]uint64 `json:"map_notify_acks,omitempty"`

	// The map-resolver: ECM Map-Requests, Map-Replies sent with their
	// records by kind, requests forwarded to ETRs, and drops by reason.
	MapRequests    uint64            `json:"map_requests"`
	MapReplies     uint64            `json:"map_replies"`
	ReplyMappings  uint64            `json:"reply_mappings"`
	ReplyNegatives uint64            `json:"reply_negatives"`
	Forwarded      uint64            `json:"forwarded"`
	Dropped        map[string]uint64 `json:"dropped,omitempty"`

	// DDT counts the DDT Map-Requests answered as DDT node or map-server,
	// DDTResolver the map-resolver's resolution through the DDT.
	DDT         *DDTCounters         `json:"ddt,omitempty"`
	DDTResolver *DDTResolverCounters `json:"ddt_resolver,omitempty"`

	// HeapInUse is the Go heap in use, for memory per registration.
	HeapInUse uint64 `json:"heap_in_use"`
	// Tunnel holds the counters of the xtr and rtr roles, when they run.
	Tunnel *TunnelCounters `json:"tunnel,omitempty"`
	// TE holds the te role's, when it runs.
	TE *pce.Counters `json:"te,omitempty"`
}

// Counters returns the current counters.
func (d *Daemon) Counters() Counters {
	c := Counters{Received: map[string]uint64{}, Unexpected: map[string]uint64{}}
	all := []*counters{&d.counter}
	for _, conn := range d.conns {
		for _, s := range conn.sockets() {
			all = append(all, &s.loop.counter)
			c.ByLoop = append(c.ByLoop, s.loop.counter.datagrams.Load())
		}
	}
	for _, k := range all {
		c.Malformed += k.malformed.Load()
		c.Oversized += k.oversized.Load()
		c.Sent += k.sent.Load()
		c.SendErrors += k.sendErrors.Load()
		c.Unroutable += k.unroutable.Load()
		for t := range k.received {
			if n := k.received[t].Load(); n > 0 {
				c.Received[lisp.MsgType(t).String()] += n
			}
			if n := k.unexpected[t].Load(); n > 0 {
				c.Unexpected[lisp.MsgType(t).String()] += n
			}
		}
	}
	if d.ms != nil {
		ms := d.ms.Counters()
		c.MapRegisters = map[string]uint64{}
		for _, r := range mapserver.Reasons() {
			c.MapRegisters[r.String()] = ms.Registers[r]
		}
		c.MapNotifies, c.Registrations, c.Expired = ms.Notifies, ms.Registrations, ms.Expired
		c.MergeNotifies = map[string]uint64{"sent": ms.Unsolicited, "retransmitted": ms.Retransmits, "unacknowledged": ms.Unacknowledged}
		c.NotifyAcks = map[string]uint64{}
		for _, r := range mapserver.AckResults() {
			c.NotifyAcks[r.String()] = ms.Acks[r]
		}
	}
	if d.mr != nil {
		mr := d.mr.Counters()
		c.MapRequests, c.MapReplies, c.Forwarded = mr.Requests, mr.Replies, mr.Forwarded
		c.ReplyMappings, c.ReplyNegatives = mr.Mappings, mr.Negatives
		c.Dropped = map[string]uint64{}
		for _, r := range resolver.DropReasons() {
			c.Dropped[r.String()] = mr.Dropped[r]
		}
	}
	d.ddtCounters(&c)
	var mem runtime.MemStats
	runtime.ReadMemStats(&mem)
	c.HeapInUse = mem.HeapInuse
	if d.tun != nil {
		c.Tunnel = d.tun.counters()
	}
	if d.te != nil {
		te := d.te.Counters()
		c.TE = &te
	}
	return c
}

// Status returns a snapshot of the daemon.
func (d *Daemon) Status() Status {
	cfg := d.config()
	st := Status{
		Version: buildinfo.Version, Started: d.started, Roles: cfg.Roles,
		Counters: d.Counters(),
	}
	d.mu.Lock()
	st.LastReload = d.lastReload
	d.mu.Unlock()
	for _, a := range d.Addrs() {
		st.Listen = append(st.Listen, a.String())
	}
	if len(d.conns) > 0 {
		st.Loops = len(d.conns[0].sockets())
	}
	if d.ms != nil {
		ms := d.ms.Status()
		st.MapServer = &ms
	}
	d.ddtStatus(&st)
	if d.tun != nil {
		if cfg.Has(config.RoleXTR) {
			x := d.tun.xtr.Status()
			st.XTR = &x
		}
		st.MapResolvers = d.tun.cache.Resolvers()
		if d.tun.join != nil {
			j := d.tun.join.Status()
			st.Join = &j
		}
		st.MapCache = d.tun.cache.Snapshot()
		if d.tun.prober != nil {
			st.Probes = d.tun.prober.Matrix()
		}
		st.Dataplane = d.tun.dataplaneStatus()
	}
	if d.te != nil {
		te := d.te.Status()
		st.TE = &te
	}
	return st
}
