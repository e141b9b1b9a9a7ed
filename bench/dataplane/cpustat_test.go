package dataplane

import (
	"strings"
	"testing"
	"time"
)

func TestCPUStat(t *testing.T) {
	before, err := parseCPUStat([]byte("cpu  511630 0 325893 885977 2785 0 64666 558 0 0\ncpu0 248912 0 171923 444426 636 0 34103 255 0 0\n"))
	if err != nil {
		t.Fatal(err)
	}
	after, err := parseCPUStat([]byte("cpu  511730 50 326893 886177 2795 10 65166 568 0 0\n"))
	if err != nil {
		t.Fatal(err)
	}
	// Without the time between the readings, busy is what the ticks counted.
	want := CPUUse{User: 1.5, System: 10, Softirq: 5.1, Idle: 2.1, Steal: 0.1, Busy: 16.6}
	near := func(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }
	same := func(got, want CPUUse) bool {
		return near(got.User, want.User) && near(got.System, want.System) && near(got.Softirq, want.Softirq) &&
			near(got.Idle, want.Idle) && near(got.Steal, want.Steal) && near(got.Busy, want.Busy)
	}
	if got := after.use(before); !same(got, want) {
		t.Errorf("use = %+v, want %+v", got, want)
	}

	// Ten seconds of two CPUs: busy is what was not idle, however few
	// ticks the split caught.
	two := "cpu  100 0 100 100 0 0 100 0 0 0\ncpu0 50 0 50 50 0 0 50 0 0 0\ncpu1 50 0 50 50 0 0 50 0 0 0\n"
	before, err = parseCPUStat([]byte(two))
	if err != nil || before.cpus != 2 {
		t.Fatalf("parseCPUStat = %+v, %v; want 2 CPUs", before, err)
	}
	after, _ = parseCPUStat([]byte("cpu  110 0 150 840 10 0 190 30 0 0\ncpu0 1 0 1 1 0 0 1 0 0 0\ncpu1 1 0 1 1 0 0 1 0 0 0\n"))
	before.at = time.Unix(1000, 0)
	after.at = before.at.Add(10 * time.Second)
	want = CPUUse{User: 0.1, System: 0.5, Softirq: 0.9, Idle: 7.5, Steal: 0.3, Busy: 12.5}
	if got := after.use(before); !same(got, want) {
		t.Errorf("use over 10 s = %+v, want %+v", got, want)
	}
	// A CPU that came or went leaves the ticks' sum.
	after.cpus = 3
	want.Busy = 1.5
	if got := after.use(before); !same(got, want) {
		t.Errorf("use with a CPU more = %+v, want %+v", got, want)
	}
	for _, bad := range []string{"", "intr 1 2 3", "cpu 1 2 3", "cpu 1 2 3 4 5 6 7 x 9"} {
		if _, err := parseCPUStat([]byte(bad)); err == nil || !strings.Contains(err.Error(), "/proc/stat") {
			t.Errorf("parseCPUStat(%q) = %v, want an error", bad, err)
		}
	}
}

func TestProcTicks(t *testing.T) {
	// A thread of Go's named with a space and a parenthesis.
	stat := "4321 (go (x) y) S 1 4321 4321 0 -1 4194560 2139 0 0 0 151 27 0 0 20 0 9 0 12345 1276660736 8987 18446744073709551615\n"
	if n, err := procTicks([]byte(stat)); err != nil || n != 178 {
		t.Errorf("procTicks = %d, %v; want 151+27", n, err)
	}
	for _, bad := range []string{"", "4321 go S 1", "4321 (go) S 1 2 3", "4321 (go) S 1 4321 4321 0 -1 4194560 2139 0 0 0 x 27 0"} {
		if _, err := procTicks([]byte(bad)); err == nil {
			t.Errorf("procTicks(%q) = nil error", bad)
		}
	}
}
