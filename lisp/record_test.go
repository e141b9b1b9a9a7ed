package lisp

import (
	"bytes"
	"testing"
)

// A Map-Reply built from its header and records encoded one by one is
// the Map-Reply AppendBinary encodes.
func TestMapReplyFromEncodedRecords(t *testing.T) {
	m := MapReply{Nonce: 0x0102030405060708, Probe: true, Records: []MapRecord{
		{TTL: 1440, EID: MustParseAddress("10.1.0.0"), MaskLen: 16, Locators: []Locator{
			{Priority: 1, Weight: 100, Reachable: true, Address: MustParseAddress("192.0.2.1")}}},
		{TTL: 15, EID: MustParseAddress("2001:db8::"), MaskLen: 32, Action: ActionNativelyForward},
	}}
	want, err := m.AppendBinary(nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := m.AppendHeader([]byte("prefix"), len(m.Records))
	if err != nil {
		t.Fatal(err)
	}
	for i := range m.Records {
		if got, err = m.Records[i].AppendBinary(got); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(got[len("prefix"):], want) || string(got[:len("prefix")]) != "prefix" {
		t.Errorf("built %x\nwant  %x", got, want)
	}
	if _, err := m.AppendHeader(nil, 256); err == nil {
		t.Error("a header for 256 records")
	}
	bad := MapRecord{EID: MustParseAddress("10.0.0.0"), MaskLen: 33}
	if _, err := bad.AppendBinary(nil); err == nil {
		t.Error("a /33 IPv4 record encoded")
	}
}
