package linkemu

import (
	"testing"

	"golang.org/x/sys/unix"
)

func TestCPUMask(t *testing.T) {
	for _, tc := range []struct {
		cpus []int
		want string
	}{
		{[]int{0}, "1"},
		{[]int{0, 1}, "3"},
		{[]int{1}, "2"},
		{[]int{2, 5}, "24"},
		{[]int{33}, "2,00000000"},
		{[]int{0, 31, 32, 63, 64}, "1,80000001,80000001"},
	} {
		if got := cpuMask(tc.cpus); got != tc.want {
			t.Errorf("cpuMask(%v) = %q, want %q", tc.cpus, got, tc.want)
		}
	}
}

func TestPlanSteering(t *testing.T) {
	set := func(cpus ...int) unix.CPUSet {
		var s unix.CPUSet
		for _, c := range cpus {
			s.Set(c)
		}
		return s
	}
	for _, tc := range []struct {
		allowed unix.CPUSet
		want    steering
	}{
		{set(0), steering{loopCPU: -1}},
		{set(3), steering{loopCPU: -1}},
		{set(0, 1), steering{loopCPU: 1, rxCPUs: "1"}},
		{set(2, 5, 7), steering{loopCPU: 7, rxCPUs: "24"}},
		{set(0, 1, 40), steering{loopCPU: 40, rxCPUs: "3"}},
	} {
		if got := planSteering(tc.allowed); got != tc.want {
			t.Errorf("planSteering(%v) = %+v, want %+v", tc.allowed, got, tc.want)
		}
	}
}
