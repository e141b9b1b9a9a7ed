package lab

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/amptcp/amptcp/cc"
	"github.com/amptcp/amptcp/internal/testenv"
	"github.com/amptcp/amptcp/lab/results"
	"github.com/amptcp/amptcp/lab/traffic"
)

// A scenario whose cc dimension names a coupled congestion control: the
// lab loads it for the runs, the flows' sockets run it (as read back from
// them), and it is unregistered after.
func TestRunScenarioCoupledCC(t *testing.T) {
	testenv.RequireRoot(t)
	_, err := os.Stat("/sys/kernel/btf/vmlinux")
	testenv.Require(t, err == nil, "needs kernel BTF for BPF struct_ops")
	testenv.ExclusiveCongestionControls(t)
	if avail, _ := cc.Available(); slices.Contains(avail, cc.LIA) {
		t.Fatalf("%s is registered on this machine already: the test could not see the lab load it", cc.LIA)
	}
	name := testenv.Prefix + "-runcc"
	s := loadRunScenario(t, name, `name: NAME
topology: lab.yaml
flows:
  - {name: f, from: client, to: server, kind: transfer, size: 1MiB, direction: download}
variants:
  pm: [subflows 2]
  cc: [lia]
repetitions: 1
timeout: 30s
`)
	labOpts := Options{Dir: t.TempDir(), Bin: bin}
	cleanupLab(t, name, labOpts)
	out := filepath.Join(t.TempDir(), "results")
	if err := RunScenario(context.Background(), s, RunOptions{Lab: labOpts, Out: out}); err != nil {
		t.Fatal(err)
	}
	res, err := results.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, recs := range res.Records {
		for _, r := range recs {
			if r.Kind != traffic.KindResult {
				continue
			}
			n++
			if r.Error != "" || r.CongestionControl != cc.LIA {
				t.Errorf("result %+v: want the flow over %s", r, cc.LIA)
			}
		}
	}
	if n != 2 {
		t.Errorf("%d results, want the client's and the server's", n)
	}
	if avail, _ := cc.Available(); slices.Contains(avail, cc.LIA) {
		t.Errorf("%s still registered after the runs", cc.LIA)
	}
}
