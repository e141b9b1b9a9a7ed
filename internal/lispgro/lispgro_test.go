package lispgro

import (
	"strings"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/amptcp/amptcp/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func TestSupported(t *testing.T) {
	for release, want := range map[string]string{
		"6.18.44-fc-v669": "", "6.5.0": "", "7.0": "", "6.10-rc1": "",
		"6.4.16":        "older than 6.5",
		"5.15.0-91-gen": "older than 6.5",
		"linux":         "cannot read",
	} {
		err := Supported(release)
		if (want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), want) {
			t.Errorf("Supported(%q) = %v, want %q", release, err, want)
		}
	}
}

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
