package netns

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// ResetTCP aborts every TCP socket left in the namespace, as `ss -K` does,
// and returns how many it aborted. Call it once the namespace's processes
// are gone, before Delete: deleting removes the name, but the kernel keeps
// the namespace while a socket in it lives, and a socket closed with data
// unacknowledged (an orphan, MPTCP's subflows among them) retransmits for
// minutes where the namespace's links went first, holding the namespace and
// what the socket uses, such as a BPF congestion control, which stays
// loaded.
func (n *NS) ResetTCP() (int, error) {
	reset := 0
	err := n.Do(func() error {
		for _, family := range []uint8{unix.AF_INET, unix.AF_INET6} {
			socks, err := netlink.SocketDiagTCP(family)
			if err != nil {
				return fmt.Errorf("list the TCP sockets of namespace %s: %w", n.Name, err)
			}
			for _, s := range socks {
				req := nl.NewNetlinkRequest(nl.SOCK_DESTROY, unix.NLM_F_ACK)
				req.AddData(destroyRequest{s})
				_, err := req.Execute(unix.NETLINK_INET_DIAG, 0)
				if errors.Is(err, unix.ENOENT) {
					continue // closed meanwhile
				}
				if err != nil {
					return fmt.Errorf("reset the TCP sockets of namespace %s: %w", n.Name, err)
				}
				reset++
			}
		}
		return nil
	})
	return reset, err
}

// destroyRequest is the inet_diag_req_v2 of SOCK_DESTROY for one socket of
// a dump, named by its addresses, ports and cookie.
type destroyRequest struct{ s *netlink.Socket }

const sizeofDiagRequest = 56

func (r destroyRequest) Len() int { return sizeofDiagRequest }

func (r destroyRequest) Serialize() []byte {
	b := make([]byte, sizeofDiagRequest)
	id := r.s.ID
	b[0], b[1] = r.s.Family, unix.IPPROTO_TCP
	binary.BigEndian.PutUint16(b[8:], id.SourcePort)
	binary.BigEndian.PutUint16(b[10:], id.DestinationPort)
	src, dst := id.Source, id.Destination
	if r.s.Family == unix.AF_INET {
		src, dst = src.To4(), dst.To4()
	}
	copy(b[12:28], src)
	copy(b[28:44], dst)
	binary.NativeEndian.PutUint32(b[44:], id.Interface)
	binary.NativeEndian.PutUint32(b[48:], id.Cookie[0])
	binary.NativeEndian.PutUint32(b[52:], id.Cookie[1])
	return b
}
