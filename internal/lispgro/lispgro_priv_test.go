package lispgro

import (
	"strings"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/amptcp/amptcp/internal/testenv"
)

// Create makes a device that Find recognises; Find refuses another
// device of that name and finds nothing where there is none.
func TestCreateAndFind(t *testing.T) {
	ns := testenv.NetNS(t)
	err := ns.Do(func() error {
		if l, err := Find(Name); l != nil || err != nil {
			t.Errorf("before: %v, %v", l, err)
		}
		if err := Create(Name); err != nil {
			return err
		}
		l, err := Find(Name)
		if err != nil || l == nil || l.Type() != "vxlan" {
			t.Errorf("after Create: %v, %v", l, err)
		}
		if err := Create(Name); err == nil {
			t.Error("a second device of the name was made")
		}
		if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "other"}, PeerName: "otherp"}); err != nil {
			return err
		}
		if l, err := Find("other"); err == nil || !strings.Contains(err.Error(), "not a collect-metadata VXLAN device") {
			t.Errorf("a veth: %v, %v", l, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
