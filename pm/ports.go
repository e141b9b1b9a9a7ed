package pm

// portRange is the ephemeral port range that subflows take their
// source ports from (net.ipv4.ip_local_port_range).
type portRange struct{ lo, hi uint16 }

// defaultPorts is Linux's default ephemeral range.
var defaultPorts = portRange{32768, 60999}

// portCandidates lists source ports for a subflow toward dport whose sum
// with dport is residue modulo p, as a port-sum xTR reads it: every port
// of the range with that residue, once, starting at the one start picks
// (start is any number; the candidates wrap around the range). A port
// the kernel finds in use is followed by the next one, p further.
type portCandidates struct {
	first uint16 // the lowest port of the range with the residue
	n     int    // how many ports of the range have it
	next  int    // index of the next candidate, modulo n
	left  int    // candidates not yet given
	p     int
}

func newPortCandidates(r portRange, dport uint16, p, residue, start int) portCandidates {
	if p < 1 {
		p = 1
	}
	want := ((residue-int(dport))%p + p) % p // sport mod p
	first := int(r.lo) + ((want-int(r.lo))%p+p)%p
	if first > int(r.hi) || r.lo > r.hi {
		return portCandidates{}
	}
	n := (int(r.hi)-first)/p + 1
	return portCandidates{first: uint16(first), n: n, next: ((start % n) + n) % n, left: n, p: p}
}

// get returns the next candidate, or false when every one was given.
func (c *portCandidates) get() (uint16, bool) {
	if c.left == 0 {
		return 0, false
	}
	port := int(c.first) + c.next*c.p
	c.next = (c.next + 1) % c.n
	c.left--
	return uint16(port), true
}
