// Package maprequest measures lispd as a map-server and map-resolver over
// loopback UDP, for `amptcp bench map-request`: how many
// Map-Registers with HMAC-SHA-256 and how many Map-Requests per second
// lispd answers on one core (or N, Options.ServerCPUs), the latency of
// Map-Requests at half that rate, and the memory a registered prefix
// takes.
//
// The numbers of a shared, noisy machine mean little alone, so every run
// also measures a reference: a server that does lispd's batched UDP I/O
// and nothing else (ServeEcho), on the same CPUs with the same GOMAXPROCS.
// lispd and the reference take turns, ten of a tenth of the duration
// each, so that the machine's noise falls on both alike. A rate's ratio
// is the median of the ten turns' ratios, so that a burst of other work
// on one turn moves it little. The p99 ratio is that of the p99s of all
// each server's samples, its turns together (compareTails): a median of
// the turns' ratios, reported beside it, would not see a delay of
// lispd's own that falls on fewer than half of its turns. The ratio of
// their rates is what lispd's LISP work costs; the reference's rate is
// what the kernel and Go's UDP path allow on this machine.
//
// The generator runs on one locked thread pinned to another CPU, calls
// sendmmsg and recvmmsg itself, polls rather than sleeps, and allocates
// nothing per request, so that it stays ahead of the server it measures;
// it reports how busy it was. A latency runs from just before sendmmsg to
// the kernel's receive timestamp of the reply, so that the generator's own
// scheduling delays are not counted against the server.
package maprequest

import (
	"errors"
	"fmt"
	"time"
)

// Options configure a run. The zero value of a field means its default.
type Options struct {
	// Lispd is the lispd binary; by default the one next to the running
	// executable, else the one in $PATH.
	Lispd string
	// Reference is the command that runs the reference server (ServeEcho)
	// as `amptcp bench echo-server` does: the bench appends
	// "-reply-size N -notify-size M", reads the address it listens on
	// from the first line of its output, and closes its input to stop it.
	Reference []string
	// Prefixes is how many prefixes to register (default 1,000,000).
	Prefixes int
	// Duration is the length of each measurement, after its warm-up
	// (default 5s).
	Duration time.Duration
	// Window is how many requests the closed loops keep in flight
	// (default 128): one or two of lispd's batches of 64 keep it busy,
	// and more only wait in its socket's buffer (4 MiB, as the
	// reference's).
	Window int
	// Keep keeps the temporary directory with lispd's configuration and
	// log.
	Keep bool
	// ServerCPUs is how many CPUs lispd and the reference each get
	// (default 1): lispd -cpus N, the reference with N workers, both
	// with GOMAXPROCS=N, on CPUs of their own when the machine has N+1,
	// else sharing the generator's. With more than one, the generator
	// sends from FlowsPerCPU×N addresses, which the servers' sockets
	// share out among their loops.
	ServerCPUs int
	// Profile, if not empty, is a directory to write lispd's CPU and
	// allocation profiles into, one set per phase (see ProfileFiles).
	Profile string
	// Progress, if not nil, receives a line on each phase and about every
	// second of the long ones.
	Progress func(line string)
}

// Defaults.
const (
	DefaultPrefixes = 1_000_000
	DefaultDuration = 5 * time.Second
	DefaultWindow   = 128
)

// maxPrefixes keeps the EIDs within the two site prefixes, which hold
// about 20 million prefixes of lengths /16 to /32 but get slow to fill
// near that.
const maxPrefixes = 10_000_000

// Validate fills in the defaults and returns every problem of the
// options at once.
func (o *Options) Validate() error {
	if o.Prefixes == 0 {
		o.Prefixes = DefaultPrefixes
	}
	if o.Duration == 0 {
		o.Duration = DefaultDuration
	}
	if o.Window == 0 {
		o.Window = DefaultWindow
	}
	if o.ServerCPUs == 0 {
		o.ServerCPUs = 1
	}
	var errs []error
	if o.Prefixes < 1 || o.Prefixes > maxPrefixes {
		errs = append(errs, fmt.Errorf("prefixes: %d is not between 1 and %d", o.Prefixes, maxPrefixes))
	}
	if o.Duration < 10*time.Millisecond || o.Duration > time.Hour {
		errs = append(errs, fmt.Errorf("duration: %s is not between 10ms and 1h", o.Duration))
	}
	if o.Window < 1 || o.Window > ringSize/2 {
		errs = append(errs, fmt.Errorf("window: %d is not between 1 and %d", o.Window, ringSize/2))
	}
	if o.ServerCPUs < 1 || o.ServerCPUs*FlowsPerCPU > maxFlows {
		errs = append(errs, fmt.Errorf("server CPUs: %d is not between 1 and %d", o.ServerCPUs, maxFlows/FlowsPerCPU))
	}
	if len(o.Reference) == 0 {
		errs = append(errs, errors.New("reference: no command for the reference server"))
	}
	return errors.Join(errs...)
}

// FlowsPerCPU is how many flows (source addresses) the generator sends
// from per server CPU, when the servers have more than one. The kernel
// shares the flows out among a server's loops by a hash: with 1,024 per
// loop, each loop's share of the load is within a few percent of equal.
const FlowsPerCPU = 1024

// flows is how many flows the generator sends from.
func (o *Options) flows() int {
	if o.ServerCPUs <= 1 {
		return 1
	}
	return FlowsPerCPU * o.ServerCPUs
}

// turns is how many times lispd and the reference take turns in each
// measurement: the noise of a shared machine (other tenants, the host's
// housekeeping, frequency changes) then falls on both alike, and their
// ratio holds even when the rates drift.
const turns = 10

// ringSize bounds the requests in flight: a request is tracked in slot
// nonce%ringSize. At 8M/s it wraps after lostAfter.
const ringSize = 1 << 21
