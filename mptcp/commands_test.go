package mptcp

import (
	"bytes"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// readCommand reads a file of testdata/commands: its command number and
// attributes.
func readCommand(t *testing.T, name string) (Command, []byte) {
	t.Helper()
	text, err := os.ReadFile(filepath.Join("testdata", "commands", name+".hex"))
	if err != nil {
		t.Fatal(err)
	}
	var cmd Command
	for l := range strings.SplitSeq(string(text), "\n") {
		if s, ok := strings.CutPrefix(l, "# command "); ok {
			n, err := strconv.Atoi(strings.Fields(s)[0])
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			cmd = Command(n)
		}
	}
	if cmd == 0 {
		t.Fatalf("%s: no '# command N' line", name)
	}
	return cmd, hexBytes(t, string(text))
}

// TestEncodeCommands compares each encoder with the bytes iproute2 sent
// to the kernel, or with the spec's encoding of the userspace path
// manager's commands.
func TestEncodeCommands(t *testing.T) {
	token := uint32(0xdeadbeef)
	ap := netip.MustParseAddrPort
	for _, tc := range []struct {
		file string
		enc  func() (request, error)
	}{
		{"ip-add-addr-v4", func() (request, error) {
			return encodeAddEndpoint(Addr{ID: 5, IP: netip.MustParseAddr("10.9.0.1"), Port: 4242, IfIndex: 3, Flags: FlagSignal})
		}},
		{"ip-add-addr-v6", func() (request, error) {
			return encodeAddEndpoint(Addr{ID: 7, IP: netip.MustParseAddr("fd00:9::1"), IfIndex: 3, Flags: FlagSubflow | FlagBackup | FlagFullmesh})
		}},
		{"ip-del-addr", func() (request, error) { return encodeDeleteEndpoint(5) }},
		{"ip-flush-addrs", func() (request, error) { return request{cmd: CmdFlushAddrs}, nil }},
		{"ip-set-limits", func() (request, error) { return encodeSetLimits(Limits{Subflows: 4, AddAddrAccepted: 3}) }},
		{"spec-subflow-create", func() (request, error) {
			return encodeSubflowCreate(token, Addr{ID: 2, IP: netip.MustParseAddr("10.0.2.1"), Port: 40002}, ap("10.0.2.2:5000"))
		}},
		{"spec-subflow-destroy", func() (request, error) {
			return encodeSubflowDestroy(token, ap("[fd00:2::1]:40002"), ap("[fd00:2::2]:5000"))
		}},
		{"spec-announce", func() (request, error) {
			return encodeAnnounce(token, Addr{ID: 3, IP: netip.MustParseAddr("10.0.2.1")})
		}},
		{"spec-remove", func() (request, error) { return encodeRemove(token, 3) }},
		{"spec-set-flags", func() (request, error) {
			return encodeSetBackup(token, ap("10.0.2.1:40002"), ap("10.0.2.2:5000"), true)
		}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			cmd, want := readCommand(t, tc.file)
			r, err := tc.enc()
			if err != nil {
				t.Fatal(err)
			}
			if r.cmd != cmd || !bytes.Equal(r.attrs, want) {
				t.Fatalf("encoded %s %x\n   want %s %x", r.cmd, r.attrs, cmd, want)
			}
		})
	}
}

// TestEncodeMapped: an IPv4 address written as ::ffff:a.b.c.d (as a [::]
// socket reports it) is sent as IPv4, which the kernel needs to match a
// subflow of an IPv4 connection.
func TestEncodeMapped(t *testing.T) {
	mapped, err := encodeSubflowDestroy(4, netip.MustParseAddrPort("[::ffff:10.0.2.1]:40002"), netip.MustParseAddrPort("[::ffff:10.0.2.2]:5000"))
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := encodeSubflowDestroy(4, netip.MustParseAddrPort("10.0.2.1:40002"), netip.MustParseAddrPort("10.0.2.2:5000"))
	if !bytes.Equal(mapped.attrs, plain.attrs) {
		t.Fatalf("mapped %x, plain %x", mapped.attrs, plain.attrs)
	}
}

func TestEncodeRefuses(t *testing.T) {
	v4 := netip.MustParseAddr("10.0.2.1")
	v6 := netip.MustParseAddr("fd00::1")
	remote := netip.MustParseAddrPort("10.0.2.2:5000")
	for name, enc := range map[string]func() (request, error){
		"create without a local address": func() (request, error) { return encodeSubflowCreate(1, Addr{}, remote) },
		"create without a remote port": func() (request, error) {
			return encodeSubflowCreate(1, Addr{IP: v4}, netip.AddrPortFrom(remote.Addr(), 0))
		},
		"create across families":       func() (request, error) { return encodeSubflowCreate(1, Addr{IP: v6}, remote) },
		"create with the signal flag":  func() (request, error) { return encodeSubflowCreate(1, Addr{IP: v4, Flags: FlagSignal}, remote) },
		"destroy without a local port": func() (request, error) { return encodeSubflowDestroy(1, netip.AddrPortFrom(v4, 0), remote) },
		"announce id 0":                func() (request, error) { return encodeAnnounce(1, Addr{IP: v4}) },
		"backup without a remote":      func() (request, error) { return encodeSetBackup(1, remote, netip.AddrPort{}, true) },
		"endpoint without an address":  func() (request, error) { return encodeAddEndpoint(Addr{ID: 1}) },
	} {
		if _, err := enc(); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s: %v; want ErrInvalidArgument", name, err)
		}
	}
}

func TestDecodeReplies(t *testing.T) {
	for _, tc := range []struct {
		file string
		want Addr
	}{
		{"ip-get-addr-reply-v4", Addr{ID: 5, IP: netip.MustParseAddr("10.9.0.1"), Port: 4242, IfIndex: 3, Flags: FlagSignal}},
		{"ip-get-addr-reply-v6", Addr{ID: 7, IP: netip.MustParseAddr("fd00:9::1"), IfIndex: 3, Flags: FlagSubflow | FlagBackup | FlagFullmesh}},
	} {
		cmd, attrs := readCommand(t, tc.file)
		got, err := decodeEndpoint(attrs)
		if cmd != CmdGetAddr || err != nil || got != tc.want {
			t.Errorf("%s: command %s, %+v, %v; want %+v", tc.file, cmd, got, err, tc.want)
		}
	}
	_, attrs := readCommand(t, "ip-get-limits-reply")
	if got, err := decodeLimits(attrs); err != nil || got != (Limits{Subflows: 4, AddAddrAccepted: 3}) {
		t.Errorf("limits reply: %+v, %v", got, err)
	}
	if got := (Addr{ID: 7, IP: netip.MustParseAddr("fd00:9::1"), IfIndex: 3, Flags: FlagSubflow | FlagBackup | FlagFullmesh}).String(); got != "fd00:9::1 id 7 subflow backup fullmesh dev#3" {
		t.Errorf("Addr.String() = %q", got)
	}
}

// TestDecodeRepliesTruncated: every cut of a reply fails cleanly or
// decodes, and a reply without its address nest is an error.
func TestDecodeRepliesTruncated(t *testing.T) {
	for _, file := range []string{"ip-get-addr-reply-v4", "ip-get-addr-reply-v6", "ip-get-limits-reply"} {
		_, attrs := readCommand(t, file)
		for n := range len(attrs) {
			_, err1 := decodeEndpoint(attrs[:n])
			_, err2 := decodeLimits(attrs[:n])
			var pe *ParseError
			for _, err := range []error{err1, err2} {
				if err != nil && !errors.As(err, &pe) {
					t.Fatalf("%s cut at %d: %v is not a *ParseError", file, n, err)
				}
			}
		}
	}
	if _, err := decodeEndpoint(nil); !errors.Is(err, ErrTruncated) {
		t.Errorf("empty endpoint reply: %v; want ErrTruncated", err)
	}
}

func TestCommandError(t *testing.T) {
	// What Execute returns for a refusal: see the netlink package's OpError.
	err := commandError(CmdSubflowCreate, wrapOp(22, "did not match address and id"))
	var ce *CommandError
	if !errors.As(err, &ce) || ce.Message != "did not match address and id" || ce.Cmd != CmdSubflowCreate {
		t.Fatalf("commandError: %#v", err)
	}
	if got := err.Error(); got != "mptcp: subflow_create: invalid argument: did not match address and id" {
		t.Errorf("Error() = %q", got)
	}
}

func wrapOp(errno unix.Errno, msg string) error {
	return &netlink.OpError{Op: "receive", Err: errno, Message: msg}
}
