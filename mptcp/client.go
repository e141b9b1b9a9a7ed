package mptcp

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// The generic netlink names of the family and its event group.
const (
	familyName  = "mptcp_pm"
	eventsGroup = "mptcp_pm_events"
	// familyVersion is MPTCP_PM_VER.
	familyVersion = 1
)

// Client is a generic netlink socket to the mptcp_pm family. Its commands
// act on the network namespace that the thread calling Dial was in, not
// on the caller's of each method: to drive another namespace, call Dial
// on a locked OS thread inside it (netns.NS.Do, testnet's Node.Do) and use
// the Client from anywhere. A Client is safe for concurrent use.
type Client struct {
	conn   *genetlink.Conn
	family genetlink.Family
}

// Dial opens a Client in the calling thread's network namespace. It fails
// with a clear error when the kernel has no mptcp_pm family (MPTCP not
// built in, or an older kernel).
func Dial() (*Client, error) {
	conn, family, err := dialFamily()
	if err != nil {
		return nil, err
	}
	// Extended acks carry the kernel's reason ("did not match address
	// and id"); without them a refusal is a bare errno.
	if err := conn.SetOption(netlink.ExtendedAcknowledge, true); err != nil {
		conn.Close()
		return nil, fmt.Errorf("mptcp: enable extended acks: %w", err)
	}
	return &Client{conn: conn, family: family}, nil
}

// dialFamily opens a generic netlink socket and resolves mptcp_pm.
func dialFamily() (*genetlink.Conn, genetlink.Family, error) {
	conn, err := genetlink.Dial(nil)
	if err != nil {
		return nil, genetlink.Family{}, fmt.Errorf("mptcp: open generic netlink socket: %w", err)
	}
	family, err := conn.GetFamily(familyName)
	if err != nil {
		conn.Close()
		if errors.Is(err, unix.ENOENT) {
			return nil, genetlink.Family{}, fmt.Errorf("mptcp: the kernel has no generic netlink family %s: is MPTCP built in (CONFIG_MPTCP) and net.mptcp.enabled=1? %w", familyName, err)
		}
		return nil, genetlink.Family{}, fmt.Errorf("mptcp: resolve generic netlink family %s: %w", familyName, err)
	}
	return conn, family, nil
}

// Close closes the socket.
func (c *Client) Close() error { return c.conn.Close() }

// CommandError is a command the kernel refused: its errno and, when the
// kernel gave one, its reason (the extended ack message).
type CommandError struct {
	Cmd     Command
	Errno   unix.Errno
	Message string
}

func (e *CommandError) Error() string {
	if e.Message != "" {
		return fmt.Sprintf("mptcp: %s: %v: %s", e.Cmd, e.Errno, e.Message)
	}
	return fmt.Sprintf("mptcp: %s: %v", e.Cmd, e.Errno)
}

// Unwrap returns the errno, so that errors.Is(err, unix.EINVAL) works.
func (e *CommandError) Unwrap() error { return e.Errno }

// commandError turns what the netlink package returns into a
// *CommandError when the kernel refused the command.
func commandError(cmd Command, err error) error {
	var errno unix.Errno
	if !errors.As(err, &errno) {
		return fmt.Errorf("mptcp: %s: %w", cmd, err)
	}
	ce := &CommandError{Cmd: cmd, Errno: errno}
	var op *netlink.OpError
	if errors.As(err, &op) {
		ce.Message = op.Message
	}
	return ce
}

// How a request is answered.
const (
	// ack: nothing but an acknowledgement (commands that change state).
	ack = netlink.Request | netlink.Acknowledge
	// get: one reply. No ack flag, which would queue an acknowledgement
	// after the reply for the next request to trip over.
	get = netlink.Request
	// dump: a multi-part reply.
	dump = netlink.Request | netlink.Dump
)

// do sends one request and returns the replies' attributes.
func (c *Client) do(r request, encErr error, flags netlink.HeaderFlags) ([][]byte, error) {
	if encErr != nil {
		return nil, encErr
	}
	msg := genetlink.Message{
		Header: genetlink.Header{Command: uint8(r.cmd), Version: familyVersion},
		Data:   r.attrs,
	}
	replies, err := c.conn.Execute(msg, c.family.ID, flags)
	if err != nil {
		return nil, commandError(r.cmd, err)
	}
	out := make([][]byte, 0, len(replies))
	for _, m := range replies {
		out = append(out, m.Data)
	}
	return out, nil
}

func (c *Client) exec(r request, err error) error {
	_, err = c.do(r, err, ack)
	return err
}

// CreateSubflow opens a subflow of connection token (userspace path
// manager only) from local to remote. local.ID 0 lets the kernel choose an
// ID; local.Port 0 lets it choose the source port. Every (address, port)
// needs its own ID: reusing an ID for another address or port fails with
// EINVAL "did not match address and id". The kernel refuses before the
// connection is established (wait for EventEstablished).
func (c *Client) CreateSubflow(token uint32, local Addr, remote netip.AddrPort) error {
	return c.exec(encodeSubflowCreate(token, local, remote))
}

// DestroySubflow closes the subflow of connection token with exactly these
// ends (both ports included).
func (c *Client) DestroySubflow(token uint32, local, remote netip.AddrPort) error {
	return c.exec(encodeSubflowDestroy(token, local, remote))
}

// Announce advertises a local address to the peer of connection token
// (ADD_ADDR). a.ID must not be 0; FlagSignal is added.
func (c *Client) Announce(token uint32, a Addr) error {
	return c.exec(encodeAnnounce(token, a))
}

// Remove withdraws the local address localID from connection token
// (REMOVE_ADDR): the peer forgets it and its subflows close.
func (c *Client) Remove(token uint32, localID uint8) error {
	return c.exec(encodeRemove(token, localID))
}

// SetBackup changes the backup priority of one subflow of connection
// token; the kernel tells the peer with MP_PRIO.
func (c *Client) SetBackup(token uint32, local, remote netip.AddrPort, backup bool) error {
	return c.exec(encodeSetBackup(token, local, remote, backup))
}

// AddEndpoint adds an endpoint to the in-kernel path manager
// (`ip mptcp endpoint add`). a.ID 0 lets the kernel choose.
func (c *Client) AddEndpoint(a Addr) error {
	return c.exec(encodeAddEndpoint(a))
}

// DeleteEndpoint deletes the in-kernel path manager's endpoint id
// (`ip mptcp endpoint delete id N`).
func (c *Client) DeleteEndpoint(id uint8) error {
	return c.exec(encodeDeleteEndpoint(id))
}

// Endpoints lists the in-kernel path manager's endpoints
// (`ip mptcp endpoint show`).
func (c *Client) Endpoints() ([]Addr, error) {
	replies, err := c.do(request{cmd: CmdGetAddr}, nil, dump)
	if err != nil {
		return nil, err
	}
	addrs := make([]Addr, 0, len(replies))
	for _, attrs := range replies {
		a, err := decodeEndpoint(attrs)
		if err != nil {
			return nil, err
		}
		addrs = append(addrs, a)
	}
	return addrs, nil
}

// FlushEndpoints deletes every endpoint (`ip mptcp endpoint flush`).
func (c *Client) FlushEndpoints() error {
	return c.exec(request{cmd: CmdFlushAddrs}, nil)
}

// Limits returns the in-kernel path manager's limits
// (`ip mptcp limits show`).
func (c *Client) Limits() (Limits, error) {
	replies, err := c.do(request{cmd: CmdGetLimits}, nil, get)
	if err != nil {
		return Limits{}, err
	}
	if len(replies) != 1 {
		return Limits{}, fmt.Errorf("mptcp: %s: %d replies, want 1", CmdGetLimits, len(replies))
	}
	return decodeLimits(replies[0])
}

// SetLimits sets both limits (`ip mptcp limits set`). The kernel caps
// each at 8 and refuses more with EINVAL.
func (c *Client) SetLimits(l Limits) error {
	return c.exec(encodeSetLimits(l))
}
