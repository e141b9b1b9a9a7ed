// Package ddt is the authority side of LISP-DDT (RFC 8111), the
// Delegated Database Tree: the ddt-node role of lispd, a node configured
// with the extended EID-prefixes (an instance ID and a prefix) it is
// authoritative for and the parts of them it delegated to child DDT nodes
// or to map-servers; and the map-server's answers to DDT Map-Requests.
// Both answer a map-resolver's DDT Map-Request (an ECM with the D bit)
// with a Map-Referral: where to ask next, that the map-server has the EID,
// or why there is nothing to find.
//
// The map-resolver that follows these referrals is in control/resolver.
package ddt

import (
	"fmt"
	"log/slog"
	"net/netip"
	"slices"

	"github.com/amptcp/amptcp/config"
	"github.com/amptcp/amptcp/control"
	"github.com/amptcp/amptcp/lisp"
	"github.com/amptcp/amptcp/mapping"
)

// Node is a DDT node. Its configuration is fixed, so it is safe for
// concurrent use.
type Node struct {
	auth        *mapping.Table[mapping.EID]
	delegations *mapping.Table[*Delegation]
	list        []*Delegation // in configuration order, for the status
	log         *slog.Logger
	counter     counters
}

// Delegation is a prefix given to children: DDT nodes (NODE-REFERRAL)
// or map-servers (MS-REFERRAL), and their RLOCs.
type Delegation struct {
	EID       mapping.EID
	Action    lisp.ReferralAction
	Referrals []lisp.Locator
}

// NewNode returns the DDT node of a validated configuration. A nil
// logger discards.
func NewNode(cfg *config.DDTNode, log *slog.Logger) (*Node, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	n := &Node{auth: authorities(cfg.AuthoritativePrefixes), delegations: mapping.NewTable[*Delegation](),
		log: log.With("component", "ddt-node")}
	for _, d := range cfg.Delegations {
		p, err := netip.ParsePrefix(d.Prefix)
		if err != nil {
			return nil, fmt.Errorf("ddt-node: delegation %q: %w", d.Prefix, err)
		}
		del := &Delegation{EID: mapping.NewEID(d.InstanceID, p), Action: lisp.ReferralNode, Referrals: Locators(d.Referrals)}
		if d.Type == config.DelegateMapServer {
			del.Action = lisp.ReferralMS
		}
		if _, dup := n.delegations.Get(del.EID); dup {
			return nil, fmt.Errorf("ddt-node: %s delegated twice", del.EID)
		}
		n.delegations.Insert(del.EID, del)
		n.list = append(n.list, del)
	}
	return n, nil
}

// Refer says what the node knows of the EID a request record asks for
// (RFC 8111 §7.1, and §8.3's pseudocode): the longest delegation that
// covers it; else, inside an authoritative prefix, the delegation hole
// around it; else that the node is not authoritative.
func (n *Node) Refer(asked lisp.RequestRecord) lisp.ReferralRecord {
	iid, ip, ok := askedEID(asked)
	if !ok {
		return notAuthoritative(asked)
	}
	if d, ok := n.delegations.Lookup(iid, ip); ok {
		return record(d.EID, d.Action, d.Referrals, false)
	}
	auth, _, ok := n.auth.Covering(mapping.HostEID(iid, ip))
	if !ok {
		return notAuthoritative(asked)
	}
	gap := n.delegations.Gap(wholeSpace(iid, ip), ip)
	return record(hole(auth, gap, ip), lisp.ReferralDelegationHole, nil, false)
}

// Authoritative reports whether an authoritative prefix covers the EID.
func (n *Node) Authoritative(iid uint32, ip netip.Addr) bool {
	_, _, ok := n.auth.Covering(mapping.HostEID(iid, ip))
	return ok
}

// HandleECM answers a DDT Map-Request that arrived from src with a
// Map-Referral to src, one record per EID asked.
func (n *Node) HandleECM(ecm *lisp.ECM, src netip.AddrPort, out *control.Outbox) {
	answer(&n.counter, n.log, ecm, src, out, func(_ *lisp.MapRequest, r lisp.RequestRecord) lisp.ReferralRecord {
		return n.Refer(r)
	})
}

// Counters returns the current counters.
func (n *Node) Counters() Counters { return n.counter.snapshot() }

// Delegations returns the configured delegations, in their order.
func (n *Node) Delegations() []*Delegation { return slices.Clone(n.list) }

// wholeSpace is every address of a's family in instance iid.
func wholeSpace(iid uint32, a netip.Addr) mapping.EID {
	return mapping.NewEID(iid, netip.PrefixFrom(a, 0))
}
