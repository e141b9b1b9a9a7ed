package dataplane

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/amptcp/amptcp/internal/procnet"
	"golang.org/x/sys/unix"
)

// iperfPort is where the iperf3 server listens in the server's namespace.
const iperfPort = 5201

// pinning is where iperf3's ends run: the client (with the forwarding
// that its sends trigger on the way through the chain, which runs in its
// context on veth) on one CPU, the server on another. -1: not pinned.
type pinning struct{ client, server int }

// cpus picks the CPUs of the client and the server among those this
// process may use, for Options.Pin; with fewer than two nothing is
// pinned.
func cpus() pinning {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return pinning{-1, -1}
	}
	var allowed []int
	for i := range 1024 {
		if set.IsSet(i) {
			allowed = append(allowed, i)
		}
	}
	if len(allowed) < 2 {
		return pinning{-1, -1}
	}
	return pinning{allowed[0], allowed[1]}
}

func (c pinning) String() string {
	if c.client < 0 {
		return "none: iperf3's ends run where the scheduler puts them"
	}
	return fmt.Sprintf("iperf3 client on cpu %d, server on cpu %d (iperf3 -A)", c.client, c.server)
}

// startIperfServer starts iperf3 -s in the server's namespace and waits
// until it listens.
func (p *path) startIperfServer(ctx context.Context, iperf3, dir string, cpu int, deadline time.Time, started func(string, int)) error {
	argv := []string{iperf3, "-s", "-B", serverIP, "-p", strconv.Itoa(iperfPort)}
	if cpu >= 0 {
		argv = append(argv, "-A", strconv.Itoa(cpu))
	}
	pr, err := startIn(p.server.NS, "iperf3 server", argv, filepath.Join(dir, p.variant.Name+"-iperf3-server.log"), nil)
	if err != nil {
		return err
	}
	p.procs = append(p.procs, pr)
	p.iperfServer = pr
	if started != nil {
		started("iperf3 server of "+p.variant.Name, pr.pid())
	}
	for {
		var listening bool
		err := p.server.NS.Do(func() (err error) {
			listening, err = procnet.TCPListening("/proc/thread-self/net", iperfPort)
			return err
		})
		switch {
		case err != nil:
			return err
		case listening:
			return nil
		case pr.exited():
			return pr.failure()
		case ctx.Err() != nil:
			return ctx.Err()
		case time.Now().After(deadline):
			return fmt.Errorf("iperf3 server does not listen on port %d%s", iperfPort, pr.logTail())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// measure runs one iperf3 client and reads the counters around it.
func (r *run) measure(ctx context.Context, p *path, profile string, streams, rep int) Measurement {
	res := Measurement{Repetition: rep, Profile: profile, Variant: p.variant.Name, Streams: streams}
	if err := r.iperf(ctx, p, &res); err != nil {
		res.Error = err.Error()
	}
	return res
}

func (r *run) iperf(ctx context.Context, p *path, res *Measurement) error {
	if p.iperfServer.exited() {
		return p.iperfServer.failure()
	}
	o := r.opts
	secs := int(o.Duration / time.Second)
	argv := []string{r.iperf3, "-c", serverIP, "-p", strconv.Itoa(iperfPort), "-t", strconv.Itoa(secs),
		"-P", strconv.Itoa(res.Streams), "-C", o.Congestion, "-J", "--connect-timeout", "5000"}
	if r.pin.client >= 0 {
		argv = append(argv, "-A", strconv.Itoa(r.pin.client))
	}
	if o.Rate > 0 { // iperf3's -b is per stream
		argv = append(argv, "-b", strconv.FormatFloat(o.Rate*1e3/float64(res.Streams), 'f', 0, 64)+"M")
	}
	name := fmt.Sprintf("%s-%s-%dstreams-rep%d", res.Variant, res.Profile, res.Streams, res.Repetition)
	out := filepath.Join(r.dir, name+".json")
	outf, err := os.Create(out)
	if err != nil {
		return err
	}
	defer outf.Close()

	srvBefore, err := p.server.Counters(p.serverLink.Iface(p.server))
	if err != nil {
		return err
	}
	hopBefore, err := p.r3.Counters(p.lastHop.Iface(p.r3))
	if err != nil {
		return err
	}
	// The path's programs (the iperf3 server, lispd) and the softirq
	// threads: their CPU time before and after.
	own := slices.Clone(r.softirqd)
	for _, pr := range p.procs {
		own = append(own, pr.pid())
	}
	var progsBefore programRuns
	if o.BPFStats {
		if progsBefore, err = p.bpfRuns(); err != nil {
			return err
		}
	}
	ownBefore := ticksOf(own)
	statBefore, err := readCPUStat()
	if err != nil {
		return err
	}
	began := time.Now()
	pr, err := startIn(p.client.NS, "iperf3 client", argv, filepath.Join(r.dir, name+".log"), outf)
	if err != nil {
		return err
	}
	if o.Started != nil {
		o.Started("iperf3 client", pr.pid())
	}
	stop := context.AfterFunc(ctx, pr.stop)
	defer stop()
	waitErr := pr.wait(o.Duration + 30*time.Second)
	res.WallSeconds = time.Since(began).Seconds()
	statAfter, err := readCPUStat()
	if err != nil {
		return err
	}
	ownTicks := ticksOf(own) - ownBefore
	if o.BPFStats {
		progsAfter, err := p.bpfRuns()
		if err != nil {
			return err
		}
		res.Programs = progsAfter.since(progsBefore)
	}
	srvAfter, err := p.server.Counters(p.serverLink.Iface(p.server))
	if err != nil {
		return err
	}
	hopAfter, err := p.r3.Counters(p.lastHop.Iface(p.r3))
	if err != nil {
		return err
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	b, err := os.ReadFile(out)
	if err != nil {
		return err
	}
	ip, err := ParseIperf(b)
	if err != nil {
		if waitErr != nil {
			return fmt.Errorf("%w (iperf3 client: %v)%s", err, waitErr, pr.logTail())
		}
		return err
	}
	res.Iperf = ip
	res.Gbps = ip.ReceivedBitsPerSecond / 1e9
	res.Packets = srvAfter.RxPackets - srvBefore.RxPackets
	res.PacketBytes = srvAfter.RxBytes - srvBefore.RxBytes
	res.Mpps, res.BytesPerPacket = rates(res.Packets, res.PacketBytes, ip.Seconds)
	res.UnderlayPackets = hopAfter.RxPackets - hopBefore.RxPackets
	res.UnderlayPacketBytes = hopAfter.RxBytes - hopBefore.RxBytes
	res.UnderlayMpps, res.UnderlayBytesPerPacket = rates(res.UnderlayPackets, res.UnderlayPacketBytes, ip.Seconds)
	res.CPU = statAfter.use(statBefore)
	res.CPU.Iperf3Client = pr.cpuTime().Seconds()
	res.CPU.Own = res.CPU.Iperf3Client + float64(ownTicks)/userHZ
	if gbit := float64(ip.Bytes) * 8 / 1e9; gbit > 0 {
		res.CPUPerGbps = res.CPU.Busy / gbit
		res.OwnCPUPerGbps = res.CPU.Own / gbit
	}
	// iperf3 -C sets the congestion control on its sockets (as root: a
	// namespace may default only to those of the host-wide
	// net.ipv4.tcp_allowed_congestion_control, which the bench leaves
	// alone). Check that it did.
	if ip.SenderCongestion != o.Congestion {
		return fmt.Errorf("iperf3's sender used %s, not %s", ip.SenderCongestion, o.Congestion)
	}
	return nil
}

// rates are millions of packets per second and bytes per packet.
func rates(packets, bytes uint64, seconds float64) (mpps, perPacket float64) {
	if packets == 0 {
		return 0, 0
	}
	return float64(packets) / seconds / 1e6, float64(bytes) / float64(packets)
}

// ticksOf sums the CPU time of processes, in USER_HZ ticks; one that
// cannot be read counts nothing.
func ticksOf(pids []int) uint64 {
	var sum uint64
	for _, pid := range pids {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			continue
		}
		if n, err := procTicks(b); err == nil {
			sum += n
		}
	}
	return sum
}

// softirqThreads are the PIDs of the kernel's ksoftirqd threads, which
// run the softirqs that overflow from where they were raised.
func softirqThreads() []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		comm, err := os.ReadFile("/proc/" + e.Name() + "/comm")
		if err == nil && strings.HasPrefix(string(comm), "ksoftirqd/") {
			pids = append(pids, pid)
		}
	}
	return pids
}

func readCPUStat() (cpuStat, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuStat{}, err
	}
	st, err := parseCPUStat(b)
	st.at = time.Now()
	return st, err
}

// findIperf3 returns the iperf3 binary: path if given, else the one in
// $PATH.
func findIperf3(path string) (string, error) {
	if path == "" {
		path = "iperf3"
	}
	p, err := exec.LookPath(path)
	if err != nil {
		return "", fmt.Errorf("find iperf3: %w (make deps installs Debian's)", err)
	}
	return p, nil
}
