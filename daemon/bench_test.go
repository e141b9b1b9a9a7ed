package daemon

import (
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"runtime/debug"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/amptcp/amptcp/config"
	"github.com/amptcp/amptcp/control/mapserver"
	"github.com/amptcp/amptcp/control/resolver"
	"github.com/amptcp/amptcp/lig"
	"github.com/amptcp/amptcp/lisp"
)

// benchConfig is the configuration of amptcp bench map-request's lispd.
const benchConfig = `
roles: [map-server, map-resolver]
map-server:
  registration-timeout: 1h
  sites: [{name: bench, keys: [{id: 0, secret: bench key}], anti-replay: false,
           eid-prefixes: [{prefix: 10.0.0.0/8, accept-more-specifics: true}]}]
map-resolver: {rate-limit: {per-second: 0}}
`

// benchDaemon is a map-server and map-resolver without sockets.
func benchDaemon(b *testing.B) *Daemon {
	cfg, err := config.Parse([]byte(benchConfig))
	if err != nil {
		b.Fatal(err)
	}
	ms, err := mapserver.New(cfg.MapServer, nil)
	if err != nil {
		b.Fatal(err)
	}
	return &Daemon{cfg: cfg, log: slog.New(slog.DiscardHandler), ms: ms, mr: resolver.New(cfg.MapResolver, ms, nil)}
}

// benchMessages are n signed Map-Registers of distinct prefixes of
// lengths /16 to /32 inside 10.0.0.0/8, as amptcp bench map-request
// registers them, and Encapsulated Map-Requests for EIDs inside them.
func benchMessages(b *testing.B, n int) (regs, reqs [][]byte) {
	r := rand.New(rand.NewPCG(1, 2))
	seen := map[netip.Prefix]bool{}
	for len(regs) < n {
		p, _ := netip.AddrFrom4([4]byte{10, byte(r.IntN(256)), byte(r.IntN(256)), byte(r.IntN(256))}).Prefix(16 + r.IntN(17))
		if seen[p] {
			continue
		}
		seen[p] = true
		m := lisp.MapRegister{ProxyReply: true, WantMapNotify: true, Nonce: uint64(len(regs) + 1),
			Auth: lisp.Auth{Algorithm: lisp.AuthHMACSHA256},
			Records: []lisp.MapRecord{{TTL: 1440, EID: lisp.IPAddress(p.Addr()), MaskLen: uint8(p.Bits()),
				Locators: []lisp.Locator{{Priority: 1, Weight: 100, Reachable: true,
					Address: lisp.IPAddress(netip.AddrFrom4([4]byte{198, 18, byte(len(regs) >> 8), byte(len(regs))}))}}}}}
		msg, err := m.AppendSigned(nil, []byte("bench key"))
		if err != nil {
			b.Fatal(err)
		}
		regs = append(regs, msg)
		if len(reqs) < 1<<18 {
			ecm, err := lig.NewRequest(lisp.IPAddress(p.Addr()), benchSource, uint64(len(reqs)+1))
			if err != nil {
				b.Fatal(err)
			}
			msg, err := ecm.AppendBinary(nil)
			if err != nil {
				b.Fatal(err)
			}
			reqs = append(reqs, msg)
		}
	}
	r.Shuffle(len(reqs), func(i, j int) { reqs[i], reqs[j] = reqs[j], reqs[i] })
	return regs, reqs
}

// cpuTime is the CPU time of the process: on a shared machine it counts
// what the benchmark used, not the time it waited for a CPU.
func cpuTime() time.Duration {
	var ru unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkHandle measures lispd's work on a datagram without the
// sockets: decoding, the map-server or map-resolver, and encoding the
// answer into the outbox. MapRegister registers new prefixes, up to 1M,
// into one table (then into a new one); MapRegisterRefresh registers
// the 1M again; MapRequest asks for EIDs among the 1M registered. cpu-ns/op is the process's CPU time, which a busy
// machine inflates less than the wall-clock ns/op.
func BenchmarkHandle(b *testing.B) {
	const n = 1_000_000
	regs, reqs := benchMessages(b, n)
	from := benchSource
	w := &worker{}
	var d *Daemon
	// registers handles the Map-Registers in turn, each batch's read
	// ahead first with prefetch; start, unless nil, gives it a new daemon
	// before each pass over the 1M.
	registers := func(b *testing.B, prefetch bool, start func()) {
		b.ReportAllocs()
		i := 0
		cpu := cpuTime()
		for b.Loop() {
			if start != nil && i%n == 0 {
				b.StopTimer()
				start()
				b.StartTimer()
			}
			w.out.Reset()
			if prefetch && i%batch == 0 {
				batchOf := datagramList(regs[i%n : min(i%n+batch, n)])
				d.prefetch(w, batchOf, len(batchOf))
			}
			d.handle(w, regs[i%n], from)
			i++
		}
		b.ReportMetric(float64(cpuTime()-cpu)/float64(i), "cpu-ns/op")
		if w.out.Len() != 1 {
			b.Fatalf("%d answers to a Map-Register", w.out.Len())
		}
	}
	register := func(prefetch, fresh bool) func(b *testing.B) {
		return func(b *testing.B) {
			registers(b, prefetch, func() {
				d = nil
				runtime.GC()
				if fresh {
					debug.FreeOSMemory()
				}
				d = benchDaemon(b)
			})
		}
	}
	b.Run("MapRegister", register(false, false))
	// The same in batches of 64, as lispd's loops read them, where each
	// batch's prefixes are read ahead together (prefetch).
	b.Run("MapRegisterBatch", register(true, false))
	// The same with the memory of each table given back to the kernel
	// before the next, as a lispd that starts registers into memory the
	// kernel has yet to map: the page faults of the heap's growth, which
	// the others reuse, and which cost lispd's register phase more than
	// any of its computing (docs/mapping.md).
	b.Run("MapRegisterFresh", register(true, true))
	d = benchDaemon(b)
	for _, m := range regs {
		w.out.Reset()
		d.handle(w, m, from)
	}
	if got := d.ms.Counters().Registrations; got != n {
		b.Fatalf("%d registrations of %d", got, n)
	}
	runtime.GC()
	// The 1M registered again, in batches read ahead, as their ETRs
	// refresh them every minute: a map-server's steady state, where the
	// ones above are its first minute.
	b.Run("MapRegisterRefresh", func(b *testing.B) {
		registers(b, true, nil)
		if got := d.ms.Counters().Registrations; got != n {
			b.Fatalf("%d registrations of %d after refreshing", got, n)
		}
	})
	b.Run("MapRequest", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		cpu := cpuTime()
		for b.Loop() {
			w.out.Reset()
			d.handle(w, reqs[i%len(reqs)], from)
			i++
		}
		b.ReportMetric(float64(cpuTime()-cpu)/float64(i), "cpu-ns/op")
		if c := d.mr.Counters(); c.Mappings < uint64(i) {
			b.Fatalf("%d mappings for %d requests", c.Mappings, i)
		}
	})
	// The requests of MapRequest as lispd's loops read them: in batches
	// of 64 in a buffer the kernel just wrote (so the messages are in the
	// CPU's caches and the lookups are not), answered one by one
	// (MapRequestHot) or after each batch's mappings were read ahead
	// together (MapRequestBatch, as lispd serves).
	eids := make([][4]byte, len(reqs))
	for i, m := range reqs {
		eids[i] = [4]byte(m[len(m)-4:]) // a request's EID ends it
	}
	hot := func(prefetch bool) func(b *testing.B) {
		return func(b *testing.B) {
			b.ReportAllocs()
			bb := newBenchBatch(reqs[0])
			i := 0
			cpu := cpuTime()
			for b.Loop() {
				if i%batch == 0 {
					bb.fill(eids, i)
					w.out.Reset()
					if prefetch {
						d.prefetch(w, bb, batch)
					}
				}
				d.handle(w, bb.pkts[i%batch], from)
				i++
			}
			b.ReportMetric(float64(cpuTime()-cpu)/float64(i), "cpu-ns/op")
			if c := d.mr.Counters(); c.Mappings < uint64(i) {
				b.Fatalf("%d mappings for %d requests", c.Mappings, i)
			}
		}
	}
	b.Run("MapRequestHot", hot(false))
	b.Run("MapRequestBatch", hot(true))
	// The same work for 1,024 EIDs, whose lookups stay in the CPU's
	// caches: the computing, without the memory latency of a large table.
	b.Run("MapRequestCached", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		cpu := cpuTime()
		for b.Loop() {
			w.out.Reset()
			d.handle(w, reqs[i%1024], from)
			i++
		}
		b.ReportMetric(float64(cpuTime()-cpu)/float64(i), "cpu-ns/op")
	})
	// Loops on every CPU (GOMAXPROCS), as lispd -cpus runs them: the CPU
	// time per request grows with what they contend for.
	b.Run("MapRequestLoops", func(b *testing.B) {
		b.ReportAllocs()
		var next atomic.Int64
		cpu := cpuTime()
		b.RunParallel(func(pb *testing.PB) {
			w := &worker{}
			i := int(next.Add(1 << 16))
			for pb.Next() {
				w.out.Reset()
				d.handle(w, reqs[i%len(reqs)], from)
				i++
			}
		})
		b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op")
	})
}

// benchBatch is a batch of Encapsulated Map-Requests in one buffer, as
// udpbatch reads them: copies of one request, each with another EID.
type benchBatch struct {
	pkts [][]byte
}

func newBenchBatch(template []byte) *benchBatch {
	b := &benchBatch{}
	buf := make([]byte, batch*len(template))
	for i := range batch {
		b.pkts = append(b.pkts, buf[i*len(template):(i+1)*len(template)])
		copy(b.pkts[i], template)
	}
	return b
}

// fill writes the EIDs from eids[from] on into the requests, where the
// inner IPv4 header has its destination and the record its EID.
func (b *benchBatch) fill(eids [][4]byte, from int) {
	for i, p := range b.pkts {
		eid := eids[(from+i)%len(eids)]
		copy(p[4+16:], eid[:])
		copy(p[len(p)-4:], eid[:])
	}
}

func (b *benchBatch) Datagram(i int) ([]byte, netip.AddrPort, bool) {
	return b.pkts[i], benchSource, false
}

// datagramList are datagrams from one source.
type datagramList [][]byte

func (s datagramList) Datagram(i int) ([]byte, netip.AddrPort, bool) {
	return s[i], benchSource, false
}

// benchSource is where the benchmarks' datagrams come from, parsed once:
// parsing it for each datagram took a tenth of a batched Map-Request.
var benchSource = netip.MustParseAddrPort("127.0.0.1:40000")
