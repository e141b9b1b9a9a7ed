package ethtool_test

import (
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/amptcp/amptcp/internal/ethtool"
	"github.com/amptcp/amptcp/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// On a veth, whose offloads are on: turning transmit checksumming off
// takes TSO with it, turning it on gives TSO back, and a handle opened in
// the namespace works from outside it; a missing device is an error that
// names it.
func TestOffloadsOfAVeth(t *testing.T) {
	ns := testenv.NetNS(t)
	var h *ethtool.Handle
	err := ns.Do(func() (err error) {
		if err = netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "v0"}, PeerName: "v1"}); err != nil {
			return err
		}
		h, err = ethtool.Open()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	get := func(o ethtool.Offload) bool {
		t.Helper()
		on, err := h.Get("v0", o)
		if err != nil {
			t.Fatal(err)
		}
		return on
	}
	if !get(ethtool.TxChecksum) || !get(ethtool.TSO) || !get(ethtool.GSO) {
		t.Fatalf("a new veth: tx-checksumming %v, TSO %v, GSO %v, want all on", get(ethtool.TxChecksum), get(ethtool.TSO), get(ethtool.GSO))
	}
	if err := h.Set("v0", ethtool.TxChecksum, false); err != nil {
		t.Fatal(err)
	}
	if get(ethtool.TxChecksum) || get(ethtool.TSO) {
		t.Errorf("tx-checksumming off: TSO %v, want off with it", get(ethtool.TSO))
	}
	if err := h.Set("v0", ethtool.TxChecksum, true); err != nil {
		t.Fatal(err)
	}
	if !get(ethtool.TSO) {
		t.Error("tx-checksumming on again: TSO still off")
	}
	if _, err := h.Get("nosuch0", ethtool.GSO); err == nil || err.Error() != "read generic-segmentation-offload of nosuch0: no such device" {
		t.Errorf("missing device: %v", err)
	}
}
