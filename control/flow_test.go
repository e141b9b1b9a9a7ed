package control

import (
	"bytes"
	"encoding/hex"
	"net/netip"
	"testing"

	"github.com/amptcp/amptcp/lisp"
)

// A stateful Map-Request's EID, byte by byte (RFC 8060 §4.1, §4.3): the
// Instance-ID LCAF outermost, holding the Application Data LCAF of the
// subflow's ports, holding the destination EID.
func TestFlowAddressBytes(t *testing.T) {
	f := Flow{IID: 1000, Protocol: 6, Source: netip.MustParseAddrPort("10.1.0.1:40000"), Dest: netip.MustParseAddrPort("10.2.0.1:5201")}
	b, err := FlowAddress(f).AppendBinary(nil)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := hex.DecodeString("" +
		"4003" + "00" + "00" + "02" + "00" + "001e" + // LCAF, type 2 (IID), mask 0, length 30
		"000003e8" + // instance 1000
		"4003" + "00" + "00" + "04" + "00" + "0012" + // LCAF, type 4 (App Data), length 18
		"000000" + "06" + // TOS 0, protocol TCP
		"9c40" + "9c40" + // local ports 40000-40000: the source's
		"1451" + "1451" + // remote ports 5201-5201: the destination's
		"0001" + "0a020001") // AFI 1, 10.2.0.1
	if !bytes.Equal(b, want) {
		t.Fatalf("flow EID\n got %x\nwant %x", b, want)
	}
	got, ok := FlowOf(FlowAddress(f), lisp.IPAddress(f.Source.Addr()))
	if !ok || got != f {
		t.Errorf("FlowOf = %v %v, want %v", got, ok, f)
	}
	other := f
	other.Source = netip.AddrPortFrom(f.Source.Addr(), 40001)
	if !f.Is(FlowAddress(f)) || f.Is(FlowAddress(other)) || f.Is(lisp.IPAddress(f.Dest.Addr())) {
		t.Error("Is tells flows apart wrong")
	}
	if iid, eid, ok := EIDOf(FlowAddress(f)); !ok || iid != 1000 || eid != f.Dest.Addr() {
		t.Errorf("EIDOf(flow) = %d %s %v", iid, eid, ok)
	}
}

// FlowOf reads both nestings and refuses what is no single flow.
func TestFlowOf(t *testing.T) {
	src := lisp.IPAddress(netip.MustParseAddr("10.1.0.1"))
	app := func(lo, hi uint16, a lisp.Address) lisp.Address {
		return lisp.LCAFAddress(&lisp.AppData{Protocol: 6, LocalPorts: lisp.PortRange{Low: lo, High: hi},
			RemotePorts: lisp.PortRange{Low: 80, High: 80}, Address: a})
	}
	iid := func(a lisp.Address) lisp.Address { return lisp.LCAFAddress(&lisp.InstanceID{IID: 7, Address: a}) }
	dst := lisp.IPAddress(netip.MustParseAddr("10.2.0.1"))
	if f, ok := FlowOf(app(1, 1, iid(dst)), src); !ok || f.IID != 7 || f.Source.Port() != 1 || f.Dest.Port() != 80 {
		t.Errorf("AppData in IID order reversed: %v %v", f, ok)
	}
	if f, ok := FlowOf(app(1, 1, dst), src); !ok || f.IID != 0 {
		t.Errorf("no instance: %v %v", f, ok)
	}
	for name, eid := range map[string]lisp.Address{
		"plain EID":        dst,
		"port range":       app(1, 9, dst),
		"two App-Data":     app(1, 1, app(1, 1, dst)),
		"two instance IDs": iid(iid(app(1, 1, dst))),
		"no address":       app(1, 1, lisp.NameAddress("x")),
	} {
		if f, ok := FlowOf(eid, src); ok {
			t.Errorf("%s: read as %v", name, f)
		}
	}
	if _, ok := FlowOf(app(1, 1, dst), lisp.Address{}); ok {
		t.Error("a flow without a source EID")
	}
	if _, ok := FlowOf(app(1, 1, dst), lisp.IPAddress(netip.MustParseAddr("2001:db8::1"))); ok {
		t.Error("a flow across families")
	}
}
