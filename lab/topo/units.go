package topo

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/amptcp/amptcp/config"
	"github.com/amptcp/amptcp/lab/linkemu"
)

// ParseRate reads a rate in bit/s written as tc writes them: "8Mbit",
// "500kbit", "1Gbit", "1200bit" (config.ParseRate).
func ParseRate(s string) (float64, error) { return config.ParseRate(s) }

// ParseQueue reads a queue size: bytes ("150000", "64KB", "64KiB",
// "1MB") or packets ("100 packets", "100p"), which count as frames of the
// link's MTU and Ethernet header.
func ParseQueue(s string, mtu int) (int, error) {
	lower := strings.ToLower(strings.TrimSpace(s))
	units := []struct {
		suffix string
		mult   int
	}{{"packets", mtu + linkemu.EthernetHeader}, {"p", mtu + linkemu.EthernetHeader},
		{"kib", 1 << 10}, {"mib", 1 << 20}, {"kb", 1000}, {"mb", 1000 * 1000}, {"b", 1}, {"", 1}}
	for _, u := range units {
		if num, ok := strings.CutSuffix(lower, u.suffix); ok {
			n, err := strconv.Atoi(strings.TrimSpace(num))
			if err != nil || n <= 0 || n > math.MaxInt32/u.mult {
				break
			}
			return n * u.mult, nil
		}
	}
	return 0, fmt.Errorf("%q is not a queue size like 64KB, 150000 or 100 packets", s)
}

// parseDelay reads a one-way delay, a duration ("20ms").
func parseDelay(s string) (time.Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%q is not a delay like 20ms", s)
	}
	return d, nil
}

// Model returns the loss model in the link emulator's terms.
func (l *Loss) Model() (linkemu.Loss, error) {
	switch {
	case l.Bernoulli != nil && l.GilbertElliott != nil:
		return linkemu.Loss{}, fmt.Errorf("bernoulli and gilbert-elliott both set: keep one")
	case l.Bernoulli != nil:
		return linkemu.Loss{Model: linkemu.Bernoulli, P: *l.Bernoulli}, nil
	case l.GilbertElliott != nil:
		ge := l.GilbertElliott
		if ge.P == nil {
			return linkemu.Loss{}, config.FieldError{Path: "gilbert-elliott.p", Msg: "missing"}
		}
		// netem's defaults: r = 1-p, h = 0 (the bad state loses every
		// frame), k = 1 (the good state loses none).
		for _, f := range []struct {
			name string
			v    *float64
		}{{"p", ge.P}, {"r", ge.R}, {"h", ge.H}, {"k", ge.K}} {
			if f.v != nil && !(*f.v >= 0 && *f.v <= 1) {
				return linkemu.Loss{}, config.FieldError{Path: "gilbert-elliott." + f.name,
					Msg: fmt.Sprintf("%g is not a probability in [0, 1]", *f.v)}
			}
		}
		r, h, k := 1-*ge.P, 0.0, 1.0
		if ge.R != nil {
			r = *ge.R
		}
		if ge.H != nil {
			h = *ge.H
		}
		if ge.K != nil {
			k = *ge.K
		}
		return linkemu.Loss{Model: linkemu.GilbertElliott, P: *ge.P, R: r, LossGood: 1 - k, LossBad: 1 - h}, nil
	}
	return linkemu.Loss{}, fmt.Errorf("missing: give bernoulli or gilbert-elliott")
}

// The emulation defaults: a link with some emulation settings but not
// all gets these for the others.
const (
	// DefaultRate is the rate of an emulated link that gives none.
	DefaultRate = 1e9
	// minQueueTime is the least time the default queue holds at the
	// link's rate.
	minQueueTime = 20 * time.Millisecond
	// minQueueFrames is the least number of frames the default queue
	// holds.
	minQueueFrames = 10
)

// DefaultMTU is the MTU of a link that gives none.
const DefaultMTU = linkemu.DefaultMTU

// defaultQueue is a queue of about one round trip at the link's rate
// (twice the one-way delay, at least minQueueTime), at least
// minQueueFrames frames.
func defaultQueue(rate float64, delay time.Duration, mtu int) int {
	t := max(2*delay, minQueueTime)
	bytes := int(rate * t.Seconds() / 8)
	return max(bytes, minQueueFrames*(mtu+linkemu.EthernetHeader))
}

func (l *Link) mtu() int {
	if l.MTU == 0 {
		return DefaultMTU
	}
	return l.MTU
}

// Emulated reports whether the link has emulation settings (rate, delay,
// loss or queue): the link emulator carries it, not a veth pair.
func (l *Link) Emulated() bool {
	return l.Rate != "" || l.Delay != "" || l.Loss != nil || l.Queue != ""
}

// Params returns the emulation of each direction of a valid link (both
// the same), with the defaults for what the link leaves out, or false
// when the link is not emulated.
func (l *Link) Params() (linkemu.Params, bool) {
	if !l.Emulated() {
		return linkemu.Params{}, false
	}
	p := linkemu.Params{Rate: DefaultRate}
	applyEmulation(&p, l.Rate, l.Delay, l.Queue, l.Loss, l.mtu())
	if l.Queue == "" {
		p.QueueBytes = defaultQueue(p.Rate, p.Delay, l.mtu())
	}
	return p, true
}

// applyEmulation sets in p the emulation fields that are given (valid).
func applyEmulation(p *linkemu.Params, rate, delay, queue string, loss *Loss, mtu int) {
	if rate != "" {
		p.Rate, _ = ParseRate(rate)
	}
	if delay != "" {
		p.Delay, _ = parseDelay(delay)
	}
	if queue != "" {
		p.QueueBytes, _ = ParseQueue(queue, mtu)
	}
	if loss != nil {
		p.Loss, _ = loss.Model()
	}
}

// ParseSize reads a size in bytes: "1048576", "256KiB", "1MiB", "5MB",
// "1GiB" (KB, MB, GB are powers of 1000; the unit's case does not
// matter).
func ParseSize(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"gib", 1 << 30}, {"mib", 1 << 20}, {"kib", 1 << 10}, {"gb", 1e9}, {"mb", 1e6}, {"kb", 1e3}, {"b", 1}, {"", 1}}
	lower := strings.ToLower(strings.TrimSpace(s))
	for _, u := range units {
		if num, ok := strings.CutSuffix(lower, u.suffix); ok {
			var n int64
			if _, err := fmt.Sscanf(strings.TrimSpace(num), "%d", &n); err != nil || n <= 0 || n > (1<<50)/u.mult ||
				fmt.Sprint(n) != strings.TrimSpace(num) {
				break
			}
			return n * u.mult, nil
		}
	}
	return 0, fmt.Errorf("%q is not a size like 256KiB, 1MiB or 5MB", s)
}

// FormatSize writes a size the shortest exact way: 256KiB, 3MiB, 1000B.
func FormatSize(n int64) string {
	switch {
	case n > 0 && n%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", n>>30)
	case n > 0 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n > 0 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}
