package dataplane

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// cpuStat is the machine's CPU time from the "cpu" line of /proc/stat,
// in USER_HZ ticks (1/100 s on Linux), and when it was read.
type cpuStat struct {
	user, nice, system, idle, iowait, irq, softirq, steal uint64

	cpus int       // the CPUs the line sums over: its cpuN lines
	at   time.Time // when it was read (monotonic); zero: unknown
}

// userHZ is the unit of /proc/stat, fixed for user space.
const userHZ = 100

// parseCPUStat reads the first line of /proc/stat, the sum over CPUs,
// and counts the CPUs' lines.
func parseCPUStat(b []byte) (cpuStat, error) {
	line, rest, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return cpuStat{}, fmt.Errorf("read /proc/stat: first line %q is not the machine's cpu line", line)
	}
	var v [8]uint64
	for i := range v {
		n, err := strconv.ParseUint(f[i+1], 10, 64)
		if err != nil {
			return cpuStat{}, fmt.Errorf("read /proc/stat: %w", err)
		}
		v[i] = n
	}
	// Past the first line only the CPUs' own lines start with "cpu".
	cpus := strings.Count("\n"+rest, "\ncpu")
	return cpuStat{user: v[0], nice: v[1], system: v[2], idle: v[3], iowait: v[4], irq: v[5], softirq: v[6], steal: v[7],
		cpus: cpus}, nil
}

// use is the CPU time spent between two readings, in seconds. Guest time
// is part of user time already.
//
// Busy is the CPUs' time between the readings less their idle time. The
// kernel keeps idle time exactly (NO_HZ), but user, system and softirq
// time only as samples of the timer tick, which on virtual machines here
// missed most of the network's softirq time (docs/kernel.md, "Timers and
// a shared machine"). What the host stole from busy CPUs is part of Busy,
// and of Steal. Without the time between the readings, or if CPUs came or
// went, Busy is the ticks' sum.
func (s cpuStat) use(before cpuStat) CPUUse {
	sec := func(after, before uint64) float64 { return float64(after-before) / userHZ }
	u := CPUUse{
		User:    sec(s.user+s.nice, before.user+before.nice),
		System:  sec(s.system, before.system),
		Softirq: sec(s.irq+s.softirq, before.irq+before.softirq),
		Idle:    sec(s.idle+s.iowait, before.idle+before.iowait),
		Steal:   sec(s.steal, before.steal),
	}
	u.Busy = u.User + u.System + u.Softirq
	if elapsed := s.at.Sub(before.at).Seconds(); !before.at.IsZero() && elapsed > 0 && s.cpus > 0 && s.cpus == before.cpus {
		u.Busy = max(0, elapsed*float64(s.cpus)-u.Idle)
	}
	return u
}

// procTicks is the CPU time, user and system, of a process from the
// contents of its /proc/PID/stat, in USER_HZ ticks.
func procTicks(stat []byte) (uint64, error) {
	// The command name, in parentheses, may hold spaces: count the fields
	// after its closing parenthesis (utime and stime are fields 14 and 15).
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("read a process's stat: no command name in %q", s)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("read a process's stat: %d fields after the command name", len(f))
	}
	utime, err1 := strconv.ParseUint(f[11], 10, 64)
	stime, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("read a process's stat: utime %q, stime %q", f[11], f[12])
	}
	return utime + stime, nil
}
