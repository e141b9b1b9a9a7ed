package control

import (
	"testing"
	"time"
)

func TestTimeNonces(t *testing.T) {
	at := time.Date(2026, 11, 22, 12, 0, 0, 123456789, time.UTC)
	n := TimeNonce(at)
	if n>>32 != uint64(at.Unix()) {
		t.Errorf("high 32 bits %d, want the Unix time %d", n>>32, at.Unix())
	}
	if back := NonceTime(n); back.After(at) || at.Sub(back) > time.Nanosecond {
		t.Errorf("NonceTime(TimeNonce(%s)) = %s", at, back)
	}
	if TimeNonce(at.Add(time.Nanosecond)) <= n || TimeNonce(at.Add(time.Second)) != n+1<<32 {
		t.Error("nonces do not follow time")
	}

	var nonces TimeNonces
	first := nonces.Next(at)
	for _, tc := range []struct {
		name string
		at   time.Time
	}{
		{"same instant", at},
		{"clock stepped back", at.Add(-time.Hour)},
		{"clock moved on", at.Add(time.Second)},
	} {
		next := nonces.Next(tc.at)
		if next <= first {
			t.Errorf("%s: %#x after %#x", tc.name, next, first)
		}
		first = next
	}
	if first != TimeNonce(at.Add(time.Second)) {
		t.Errorf("once the clock moved on, the nonce is its time: %#x", first)
	}
}
