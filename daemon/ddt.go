package daemon

import (
	"fmt"
	"log/slog"

	"github.com/amptcp/amptcp/config"
	"github.com/amptcp/amptcp/control"
	"github.com/amptcp/amptcp/control/ddt"
	"github.com/amptcp/amptcp/control/resolver"
	"github.com/amptcp/amptcp/lisp"
	"github.com/amptcp/amptcp/mapping"
)

// newAuthority builds what answers DDT Map-Requests in this lispd: the
// ddt-node role and the map-server (every map-server answers them, RFC
// 8111 §7.2); nil when neither runs.
func (d *Daemon) newAuthority(cfg *config.Config, log *slog.Logger) (*ddt.Authority, error) {
	a := &ddt.Authority{}
	if cfg.Has(config.RoleDDTNode) {
		n, err := ddt.NewNode(cfg.DDTNode, log)
		if err != nil {
			return nil, err
		}
		a.Node = n
	}
	if d.ms != nil {
		a.MapServer = ddt.NewMapServer(cfg.MapServer, d.ms, log)
	}
	if a.Node == nil && a.MapServer == nil {
		return nil, nil
	}
	return a, nil
}

// newResolver builds the map-resolver: it answers from the map-server in
// this lispd, through the DDT, or both.
func (d *Daemon) newResolver(cfg *config.Config, log *slog.Logger) (*resolver.Resolver, error) {
	var db mapping.Database
	if d.ms != nil {
		db = d.ms // not a nil *mapserver.Server in a non-nil interface
	}
	if db == nil && cfg.MapResolver.DDT == nil {
		return nil, fmt.Errorf("map-resolver: needs the map-server role in the same lispd, or map-resolver.ddt")
	}
	return resolver.New(cfg.MapResolver, db, log, resolver.WithSender(control.SenderFunc(d.send))), nil
}

// DDTCounters are the counters of the DDT Map-Requests this lispd
// answered, as DDT node or DDT map-server.
type DDTCounters struct {
	Requests  uint64            `json:"requests"`
	Referrals map[string]uint64 `json:"referrals"` // the records sent, by action
	Dropped   map[string]uint64 `json:"dropped"`   // the requests not answered, by reason
	Forwarded uint64            `json:"forwarded"` // map-server: requests forwarded to ETRs
	Proxied   uint64            `json:"proxied"`   // map-server: Map-Replies sent for ETRs
}

// DDTResolverCounters are the counters of the map-resolver's resolution
// through the DDT (resolver.DDTCounters, by name).
type DDTResolverCounters struct {
	Requests      uint64            `json:"requests"`
	CachePositive uint64            `json:"cache_positive"`
	CacheNegative uint64            `json:"cache_negative"`
	Duplicates    uint64            `json:"duplicates"`
	Overload      uint64            `json:"overload"`
	Sent          uint64            `json:"sent"`
	Timeouts      uint64            `json:"timeouts"`
	Exhausted     uint64            `json:"exhausted"`
	Resolved      uint64            `json:"resolved"`
	Negatives     uint64            `json:"negatives"`
	Stale         uint64            `json:"stale"`
	Referrals     map[string]uint64 `json:"referrals"` // followed, by action
	Refused       map[string]uint64 `json:"refused"`   // by reason
	CacheEntries  int               `json:"cache_entries"`
	Pending       int               `json:"pending"`
	CacheFull     uint64            `json:"cache_full"`
	Expired       uint64            `json:"expired"`
}

// ddtCounters fills in the DDT counters of c.
func (d *Daemon) ddtCounters(c *Counters) {
	if d.ddt != nil {
		a := d.ddt.Counters()
		dc := &DDTCounters{Requests: a.Requests, Forwarded: a.Forwarded, Proxied: a.Proxied,
			Referrals: byAction(a.Referrals[:]), Dropped: map[string]uint64{}}
		for _, r := range ddt.DropReasons() {
			dc.Dropped[r.String()] = a.Dropped[r]
		}
		c.DDT = dc
	}
	if d.mr == nil {
		return
	}
	r, ok := d.mr.DDTCounters()
	if !ok {
		return
	}
	rc := &DDTResolverCounters{Requests: r.Requests, CachePositive: r.CachePositive, CacheNegative: r.CacheNegative,
		Duplicates: r.Duplicates, Overload: r.Overload, Sent: r.Sent, Timeouts: r.Timeouts, Exhausted: r.Exhausted,
		Resolved: r.Resolved, Negatives: r.Negatives, Stale: r.Stale, Referrals: byAction(r.Referrals[:]),
		Refused: map[string]uint64{}, CacheEntries: r.CacheEntries, Pending: r.Pending, CacheFull: r.CacheFull, Expired: r.Expired}
	for _, reason := range resolver.RefusedReasons() {
		rc.Refused[reason.String()] = r.Refused[reason]
	}
	c.DDTResolver = rc
}

// byAction names counts indexed by referral action.
func byAction(counts []uint64) map[string]uint64 {
	m := make(map[string]uint64, len(counts))
	for i, n := range counts {
		m[lisp.ReferralAction(i).String()] = n
	}
	return m
}

// DelegationStatus is a delegation of the ddt-node role, as `lispd
// status` shows it.
type DelegationStatus struct {
	EID       string   `json:"eid"`
	Action    string   `json:"action"` // node-referral or ms-referral
	Referrals []string `json:"referrals"`
}

// ddtStatus fills in the DDT parts of st.
func (d *Daemon) ddtStatus(st *Status) {
	if d.ddt != nil && d.ddt.Node != nil {
		for _, del := range d.ddt.Node.Delegations() {
			ds := DelegationStatus{EID: del.EID.String(), Action: del.Action.String()}
			for _, r := range del.Referrals {
				ds.Referrals = append(ds.Referrals, fmt.Sprintf("%s priority %d weight %d", r.Address, r.Priority, r.Weight))
			}
			st.DDTNode = append(st.DDTNode, ds)
		}
	}
	if d.mr != nil {
		st.DDTResolver = d.mr.DDTStatus()
	}
}
