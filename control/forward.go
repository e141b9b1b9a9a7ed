package control

import "net/netip"

// The flags of an ECM's first byte (RFC 9301 §5.8, RFC 8111 §5): S, D, E
// and M after the 4-bit type.
const (
	ecmDDT   = 0x04
	ecmToETR = 0x02
	ecmToMS  = 0x01
)

// ForwardToETR queues the Encapsulated Map-Request raw for the ETR at
// etr, port 4342, unchanged but for its flags: E (to the ETR) set, and D
// (from a DDT client) and M (to a map-server) cleared, since the ETR is
// neither. The ETR replies to the ITR itself.
func ForwardToETR(out *Outbox, raw []byte, etr netip.Addr) {
	b := append(out.Begin(), raw...)
	first := len(b) - len(raw)
	b[first] = b[first]&^(ecmDDT|ecmToMS) | ecmToETR
	out.Commit(netip.AddrPortFrom(etr, Port), b)
}
