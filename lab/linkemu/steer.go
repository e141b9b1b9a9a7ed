package linkemu

import (
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/amptcp/amptcp/internal/netns"
)

// Receive steering. The kernel takes in a frame that the loop writes into
// a TAP within the write itself: the receiving host's TCP, the ACK it
// sends, and, ACK-clocked, the sender's next segments all ran on the
// loop's thread. The loop was the bottleneck: one CPU busy, a third of the
// other idle, 1.4-1.8 Gbit/s. So the loop keeps one CPU, and the TAPs
// hand what they receive to the others (RPS, as a NIC's queues spread
// their interrupts): 3.4-3.9 Gbit/s on the same machine (docs/linkemu.md).
type steering struct {
	loopCPU int    // the CPU the loop is pinned to; -1: no steering
	rxCPUs  string // the TAPs' rps_cpus: every other CPU the process may use
}

// planSteering keeps the last of the CPUs allowed for the loop and steers
// to the others. With one CPU there is nothing to steer to.
func planSteering(allowed unix.CPUSet) steering {
	var cpus []int
	for i := range len(allowed) * 64 {
		if allowed.IsSet(i) {
			cpus = append(cpus, i)
		}
	}
	if len(cpus) < 2 {
		return steering{loopCPU: -1}
	}
	last := len(cpus) - 1
	return steering{loopCPU: cpus[last], rxCPUs: cpuMask(cpus[:last])}
}

// cpuMask writes a set of CPUs as sysfs's cpumask files do: hexadecimal
// words of 32 CPUs, the highest first, separated by commas.
func cpuMask(cpus []int) string {
	words := make([]uint32, cpus[len(cpus)-1]/32+1)
	for _, c := range cpus {
		words[c/32] |= 1 << (c % 32)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%x", words[len(words)-1])
	for i := len(words) - 2; i >= 0; i-- {
		fmt.Fprintf(&b, ",%08x", words[i])
	}
	return b.String()
}

// pinLoop pins the calling thread, the loop's, to its CPU.
func (s steering) pinLoop() error {
	var set unix.CPUSet
	set.Set(s.loopCPU)
	return unix.SchedSetaffinity(0, &set)
}

// steerTAP sets the receive steering of ep's TAP device.
func (s steering) steerTAP(ep Endpoint) error {
	rel := "class/net/" + ep.Name + "/queues/rx-0/rps_cpus"
	if ep.Namespace == "" { // the caller's namespace, whose /sys this is
		return os.WriteFile("/sys/"+rel, []byte(s.rxCPUs), 0)
	}
	return (&netns.NS{Name: ep.Namespace}).WriteSysfs(rel, s.rxCPUs)
}
