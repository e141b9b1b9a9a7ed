package linkemu

import (
	"fmt"
	"math/big"
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/amptcp/amptcp/internal/netns"
)

// The TAPs hand their receive work to every CPU but the loop's, and the
// loop runs on that one alone.
func TestReceiveSteering(t *testing.T) {
	var allowed unix.CPUSet
	if err := unix.SchedGetaffinity(0, &allowed); err != nil {
		t.Fatal(err)
	}
	plan := planSteering(allowed)
	if plan.loopCPU < 0 {
		t.Skip("one CPU: nothing to steer to")
	}
	r := newRig(t, fastLink(0))
	cfg, err := r.link.Config()
	if err != nil {
		t.Fatal(err)
	}
	for _, ep := range []Endpoint{cfg.A, cfg.B} {
		got, err := (&netns.NS{Name: ep.Namespace}).ReadSysfs("class/net/" + ep.Name + "/queues/rx-0/rps_cpus")
		if err != nil {
			t.Fatal(err)
		}
		if maskValue(t, got).Cmp(maskValue(t, plan.rxCPUs)) != 0 {
			t.Errorf("%s: rps_cpus %q, want %q (all but the loop's CPU %d)", ep.Name, strings.TrimSpace(got), plan.rxCPUs, plan.loopCPU)
		}
	}
	// The loop pins itself when it starts; round trips show it runs.
	cli, srv := r.udpPair(t)
	go echo(srv)
	rtts(t, cli, srv.LocalAddr(), 3)
	status, err := os.ReadFile(fmt.Sprintf("/proc/self/task/%d/status", r.em.loopThread.Load()))
	if err != nil {
		t.Fatalf("the loop's thread: %v", err)
	}
	if !strings.Contains(string(status), "\nCpus_allowed_list:\t"+strconv.Itoa(plan.loopCPU)+"\n") {
		t.Errorf("the loop's thread is not pinned to CPU %d:\n%s", plan.loopCPU, status)
	}
}

// maskValue reads a cpumask as sysfs writes it ("3", "00000000,00000003").
func maskValue(t *testing.T, mask string) *big.Int {
	t.Helper()
	v, ok := new(big.Int).SetString(strings.ReplaceAll(strings.TrimSpace(mask), ",", ""), 16)
	if !ok {
		t.Fatalf("cpumask %q is not hexadecimal", mask)
	}
	return v
}
