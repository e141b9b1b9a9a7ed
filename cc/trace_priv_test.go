package cc

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/cilium/ebpf"
)

// AMPTCP_CC_TRACE=1 makes the proof tests log, every 500 ms of a
// measurement, each MPTCP flow's subflows as the kernel and the control's
// map see them: window, threshold, smoothed RTT, state, rate since the
// last line, bytes not sent, and the coupling terms of the map's slot
// (alpha, OLIA's bytes between losses). It is how the behaviour behind
// a failed bound is read; the tests do not need it.
const traceEnv = "AMPTCP_CC_TRACE"

func tracing() bool { return os.Getenv(traceEnv) == "1" }

// trace logs flows every 500 ms until stop is closed.
func (rg *rig) trace(flows []*flow, stop <-chan struct{}) {
	prev := map[string]uint64{}
	last := time.Now()
	start := last
	for {
		select {
		case <-stop:
			return
		case <-time.After(500 * time.Millisecond):
		}
		now := time.Now()
		dt := now.Sub(last).Seconds()
		last = now
		slots := traceSlots()
		for _, f := range flows {
			fi, err := f.fullInfo()
			if err != nil || len(fi.Subflows) == 0 {
				continue
			}
			var b strings.Builder
			fmt.Fprintf(&b, "trace %5.1fs %s:", now.Sub(start).Seconds(), f.name)
			for _, sf := range fi.Subflows {
				k := fmt.Sprintf("%s/%d", f.name, sf.ID)
				rate := float64(sf.TCP.BytesAcked-prev[k]) * 8 / dt / 1e6
				if prev[k] == 0 {
					rate = 0
				}
				prev[k] = sf.TCP.BytesAcked
				fmt.Fprintf(&b, " [a%d cwnd %d ss %d rtt %.1f st %d %.2fM notsent %d",
					sf.Local.Addr().As4()[2], sf.TCP.SndCwnd, min(sf.TCP.SndSsthresh, 99999),
					float64(sf.TCP.RTT.Microseconds())/1000, sf.TCP.CAState, rate, sf.TCP.NotsentBytes)
				if s, ok := slots[slotKey{fi.Info.Token, uint32(sf.ID)}]; ok {
					l := max(s.Acked-s.LossMark, s.LossPrev)
					fmt.Fprintf(&b, " | alpha %.3f l %d", fixed(int64(s.Alpha)), l/1448)
				}
				b.WriteString("]")
			}
			rg.t.Log(b.String())
		}
	}
}

type slotKey struct{ token, id uint32 }

// traceSlots reads the slots of every control's connections map.
func traceSlots() map[slotKey]ccAmpSlot {
	out := map[slotKey]ccAmpSlot{}
	eachMap(func(m *ebpf.Map, info *ebpf.MapInfo) {
		if !strings.HasSuffix(info.Name, "_conns") {
			return
		}
		var token uint32
		var v ccAmpConn
		it := m.Iterate()
		for it.Next(&token, &v) {
			for _, s := range v.Slots {
				if s.Id != 0 {
					out[slotKey{token, s.Id}] = s
				}
			}
		}
	})
	return out
}
