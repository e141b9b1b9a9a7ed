package pm

import (
	"net/netip"
	"time"

	"github.com/amptcp/amptcp/mptcp"
)

// Kernel is the userspace path manager's side of the kernel: the
// commands of the mptcp_pm generic netlink family. *mptcp.Client is one;
// tests use a fake.
type Kernel interface {
	CreateSubflow(token uint32, local mptcp.Addr, remote netip.AddrPort) error
	DestroySubflow(token uint32, local, remote netip.AddrPort) error
	Announce(token uint32, a mptcp.Addr) error
	Limits() (mptcp.Limits, error)
	// SetBackup sets or clears a subflow's backup priority (SET_FLAGS,
	// which sends MP_PRIO).
	SetBackup(token uint32, local, remote netip.AddrPort, backup bool) error
}

// Diag reads the kernel's MPTCP sockets (sock_diag), reduced to what the
// path manager needs.
type Diag interface {
	Connections() ([]ConnInfo, error)
	Subflows() ([]SubflowInfo, error)
}

// EventSource is the mptcp_pm event stream (*mptcp.EventListener).
// Receive returns an error wrapping mptcp.ErrEventsLost when the kernel
// dropped events (the socket overran): the state must be read again; and
// net.ErrClosed once closed.
type EventSource interface {
	Receive() ([]mptcp.Event, error)
	Malformed() uint64
	Close() error
}

// TCP states of sock_diag (include/net/tcp_states.h).
const (
	tcpEstablished = 1
	tcpSynSent     = 2
	tcpListen      = 10
)

// ConnInfo is an MPTCP connection as sock_diag shows it.
type ConnInfo struct {
	Token         uint32
	Local, Remote netip.AddrPort
	State         uint8 // a TCP state
	// Listener is set for listening sockets, which have no token.
	Listener bool
	// Bytes is what the connection sent and received (MPTCP_INFO).
	Bytes uint64
}

// SubflowInfo is a subflow (a TCP socket of an MPTCP connection) as
// sock_diag shows it.
type SubflowInfo struct {
	Token             uint32
	Local, Remote     netip.AddrPort
	LocalID, RemoteID uint8
	State             uint8 // a TCP state
	BytesAcked        uint64
	// Retransmits and Backoff are tcp_info's: unrecovered RTO
	// retransmissions and the RTO's backoff exponent, both 0 while
	// acknowledgements come.
	Retransmits, Backoff uint8
	RTT                  time.Duration
}
