package pm

import (
	"time"
)

// backups applies the backup policy to c: a subflow whose RTT exceeds
// both rtt-ratio times and rtt-margin more than its connection's best
// only adds head-of-line blocking (the kernel's scheduler would put data
// on it when the best is full, and the receiver would wait for it), so it
// gets backup priority (MP_PRIO, SET_FLAGS), which the scheduler uses only
// when no regular subflow can send. It is taken back when the RTT falls
// below 0.8 of that bound, or when no regular subflow of the connection
// works any more: a failed one, a stalled one.
func (e *engine) backups(c *conn) {
	b := e.cfg.Backup
	if !b.Enabled || c.state != stateOpen {
		return
	}
	var best time.Duration
	working := map[*attempt]bool{}
	for a := range c.attempts() {
		if a.established && a.rtt > 0 && !a.stuck {
			working[a] = true
			if best == 0 || a.rtt < best {
				best = a.rtt
			}
		}
	}
	if best == 0 {
		return
	}
	bound := max(time.Duration(float64(best)*b.RTTRatio), best+b.RTTMargin.Duration)
	regular := 0
	for a := range working {
		want := a.rtt > bound
		if a.backup {
			want = a.rtt > bound*8/10 // hysteresis
		}
		if !want {
			regular++
		}
		e.setBackup(c, a, want)
	}
	for a := range c.attempts() {
		// The slow ones come back when the regular ones are gone.
		if a.backup && (regular == 0 || !working[a]) {
			e.setBackup(c, a, false)
		}
	}
}

// setBackup changes the priority of one subflow if it differs.
func (e *engine) setBackup(c *conn, a *attempt, backup bool) {
	if a.backup == backup {
		return
	}
	if err := e.k.SetBackup(c.token, a.local, a.remote, backup); err != nil {
		e.log.Debug("set backup priority", "token", c.token, "local", a.local, "remote", a.remote, "backup", backup, "error", err)
		return
	}
	a.backup = backup
	if backup {
		e.count.backups++
	} else {
		e.count.promotions++
	}
	e.log.Info("subflow priority", "token", c.token, "local", a.local, "remote", a.remote, "backup", backup, "rtt", a.rtt)
}
