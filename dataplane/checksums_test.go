package dataplane

import (
	"testing"

	"github.com/amptcp/amptcp/config"
	"github.com/amptcp/amptcp/internal/ethtool"
)

// complete-checksums turns the RLOC interface's transmit checksum offload
// (and with it TSO) off while the data plane runs, and gives both back
// when it closes; an interface it does not name keeps its offloads.
func TestCompleteChecksumsAndBack(t *testing.T) {
	r := newRig(t, config.Dataplane{RLOCInterfaces: []string{"rloc0", "other0"}, CompleteChecksums: []string{"rloc0"}}, Options{})
	read := func(iface string) (csum, tso bool) {
		t.Helper()
		err := r.ns.Do(func() (err error) {
			if csum, err = ethtool.Get(iface, ethtool.TxChecksum); err == nil {
				tso, err = ethtool.Get(iface, ethtool.TSO)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return csum, tso
	}
	if csum, tso := read("rloc0"); csum || tso {
		t.Errorf("rloc0 while running: tx-checksumming %v, TSO %v, want both off", csum, tso)
	}
	if csum, tso := read("other0"); !csum || !tso {
		t.Errorf("other0 while running: tx-checksumming %v, TSO %v, want both on", csum, tso)
	}
	if err := r.dp.Close(); err != nil {
		t.Fatal(err)
	}
	if csum, tso := read("rloc0"); !csum || !tso {
		t.Errorf("rloc0 after Close: tx-checksumming %v, TSO %v, want both on again", csum, tso)
	}
}

// A restart keeps the offload off, as the data plane it adopts needs it,
// and the stop for good of the lispd after it turns it on again.
func TestCompleteChecksumsAcrossARestart(t *testing.T) {
	pins := testPins(t)
	r := newRig(t, config.Dataplane{PinPath: pins, CompleteChecksums: []string{"rloc0"}}, Options{})
	txChecksum := func() bool {
		t.Helper()
		var on bool
		if err := r.ns.Do(func() (err error) { on, err = ethtool.Get("rloc0", ethtool.TxChecksum); return err }); err != nil {
			t.Fatal(err)
		}
		return on
	}
	if err := r.dp.Keep(); err != nil {
		t.Fatal(err)
	}
	if txChecksum() {
		t.Error("tx-checksumming on after Keep, want it left off for the next lispd")
	}
	dp, err := r.restart(config.Dataplane{PinPath: pins, CompleteChecksums: []string{"rloc0"}})
	if err != nil {
		t.Fatal(err)
	}
	if txChecksum() {
		t.Error("tx-checksumming on after the restart")
	}
	if err := dp.Close(); err != nil {
		t.Fatal(err)
	}
	if !txChecksum() {
		t.Error("tx-checksumming off after the stop for good, want it on again")
	}
}
