package pm

import (
	"testing"
	"time"
)

// The backup policy gives backup priority to a subflow whose RTT is far
// above the best one's, takes it back when the RTT comes down, and when
// the regular subflow stalls.
func TestBackupPolicy(t *testing.T) {
	te := newTestEngine(t, "policy: ndiffports\nsubflows: 2\nbackup: {enabled: true, rtt-ratio: 3, rtt-margin: 20ms}\nrepair: {enabled: false}\n")
	cs := openAndEstablish(te)
	slow := cs[0]
	poll := func(fast, slowRTT time.Duration, retrans uint8) {
		te.clock.add(200 * time.Millisecond)
		te.diag.set(nil, []SubflowInfo{
			{Token: 1, Local: clientAddr, Remote: serverAddr, State: tcpEstablished, RTT: fast, BytesAcked: 1000, Retransmits: retrans},
			{Token: 1, Local: localOf(slow), Remote: slow.remote, State: tcpEstablished, RTT: slowRTT, BytesAcked: 1000},
		})
		te.tick()
	}
	backups := func() []backupCmd {
		te.k.mu.Lock()
		defer te.k.mu.Unlock()
		b := te.k.backups
		te.k.backups = nil
		return b
	}
	poll(20*time.Millisecond, 50*time.Millisecond, 0) // below 3 x 20 ms
	if b := backups(); len(b) != 0 {
		t.Fatalf("set %v for an RTT within the bound", b)
	}
	poll(20*time.Millisecond, 150*time.Millisecond, 0)
	if b := backups(); len(b) != 1 || b[0].local != localOf(slow) || !b[0].backup {
		t.Fatalf("set %v, want the 150 ms subflow backup", b)
	}
	poll(20*time.Millisecond, 55*time.Millisecond, 0) // above 0.8 of the bound: stays
	if b := backups(); len(b) != 0 {
		t.Fatalf("set %v within the hysteresis", b)
	}
	poll(20*time.Millisecond, 40*time.Millisecond, 0)
	if b := backups(); len(b) != 1 || b[0].backup {
		t.Fatalf("set %v, want the subflow regular again at 40 ms", b)
	}
	poll(20*time.Millisecond, 150*time.Millisecond, 0)
	backups()
	poll(20*time.Millisecond, 150*time.Millisecond, 1) // the fast one retransmits: no regular left
	if b := backups(); len(b) != 1 || b[0].local != localOf(slow) || b[0].backup {
		t.Fatalf("set %v, want the backup promoted when the regular subflow stalls", b)
	}
	if c := te.counters(); c.Backups != 2 || c.Promotions != 2 {
		t.Errorf("counters: %d backups, %d promotions; want 2 and 2", c.Backups, c.Promotions)
	}
}
