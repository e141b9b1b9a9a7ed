package lig

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestWriteJSONErrors(t *testing.T) {
	for _, tc := range []struct {
		res  *Result
		err  error
		want string
	}{
		{&Result{Tries: 3, Ignored: 1}, ErrNoReply, `{"error":"no map-reply received","tries":3,"ignored":1,"malformed":0}`},
		{&Result{Tries: 1}, fmt.Errorf("lig: %w", context.Canceled), `{"error":"lig: context canceled","tries":1,"ignored":0,"malformed":0}`},
		{nil, errors.New("lig: listen on 192.0.2.99: cannot assign"), `{"error":"lig: listen on 192.0.2.99: cannot assign","tries":0,"ignored":0,"malformed":0}`},
		// A result without a reply is the no-reply case, not a crash.
		{&Result{Tries: 2}, nil, `{"error":"no map-reply received","tries":2,"ignored":0,"malformed":0}`},
	} {
		var out strings.Builder
		if err := WriteJSON(&out, tc.res, tc.err); err != nil || out.String() != tc.want+"\n" {
			t.Errorf("WriteJSON(%+v, %v) = %q, %v; want %s", tc.res, tc.err, out.String(), err, tc.want)
		}
	}
}

func TestTTLText(t *testing.T) {
	for ttl, want := range map[uint32]string{0: "0 mins", 1440: "1440 mins", 0xffffffff: "forever (receiver decides)"} {
		if got := ttlText(ttl); got != want {
			t.Errorf("ttlText(%d) = %q, want %q", ttl, got, want)
		}
	}
}
