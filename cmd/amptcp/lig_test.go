package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/amptcp/amptcp/lig/ligtest"
	"github.com/amptcp/amptcp/lisp"
)

// ligRecord is 10.2.0.0/16 with a plain RLOC, one that is down, and a
// path sent the lispers.net way (an ELP after AFI 0 in an AFI List).
func ligRecord(eid lisp.Address) lisp.MapRecord {
	return lisp.MapRecord{
		TTL: 1440, EID: eid, MaskLen: 16, Authoritative: true, MapVersion: 3,
		Locators: []lisp.Locator{
			{Priority: 1, Weight: 50, MPriority: 255, Reachable: true, Address: lisp.MustParseAddress("192.0.2.1")},
			{Priority: 2, Weight: 100, MPriority: 255, Local: true, Address: lisp.MustParseAddress("192.0.2.2")},
			{Priority: 1, Weight: 50, MPriority: 255, MWeight: 10, Reachable: true, Address: lisp.LCAFAddress(&lisp.AFIList{
				Addresses: []lisp.Address{{}, lisp.LCAFAddress(&lisp.ELP{Hops: []lisp.ELPHop{
					{Address: lisp.MustParseAddress("192.0.2.10"), RLOCProbe: true},
					{Address: lisp.MustParseAddress("192.0.2.20"), RLOCProbe: true, Strict: true},
					{Address: lisp.MustParseAddress("198.51.100.1"), Lookup: true},
				}})},
			})},
		},
	}
}

// ligAnswer answers every request after dropping the first drop ones, and
// precedes the answer with garbage and a reply with a wrong nonce when
// noisy.
func ligAnswer(drop int, noisy bool, rec lisp.MapRecord) ligtest.Handler {
	return func(req *ligtest.Request) [][]byte {
		if req.N <= drop {
			return nil
		}
		var pkts [][]byte
		if noisy {
			pkts = append(pkts, []byte("not lisp"), req.ReplyWithNonce(req.MapRequest.Nonce+1, rec))
		}
		return append(pkts, req.Reply(rec))
	}
}

func TestLigText(t *testing.T) {
	mr := ligtest.NewResolver(t, ligAnswer(0, false, ligRecord(lisp.MustParseAddress("10.2.0.0"))))
	code, out, errOut := runCmd("", "lig", "-m", mr.Addr.String(), "10.2.0.1")
	if code != 0 || errOut != "" {
		t.Fatalf("lig = %d, stderr %q", code, errOut)
	}
	t.Logf("output:\n%s", out)
	for _, want := range []string{
		fmt.Sprintf("Send map-request to %s for 10.2.0.1 ...\n", mr.Addr),
		fmt.Sprintf("Received map-reply from %s with rtt ", mr.Replier),
		"\nMapping entry for EID 10.2.0.1:\n10.2.0.0/16, via map-reply, record ttl: 1440 mins, auth, map-version 3\n",
		"  192.0.2.1                           up     1/50             255/0                R\n",
		"  192.0.2.2                           down   2/100            255/0                L\n",
		"  (path)                              up     1/50             255/10               R\n" +
			"    elp 192.0.2.10(P) -> 192.0.2.20(P,S) -> 198.51.100.1(L)\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

// Flags may follow the EID; -i asks in an instance and the record is
// printed with it.
func TestLigInstanceID(t *testing.T) {
	prefix := lisp.LCAFAddress(&lisp.InstanceID{IID: 1000, Address: lisp.MustParseAddress("10.2.0.0")})
	mr := ligtest.NewResolver(t, ligAnswer(0, false, ligRecord(prefix)))
	code, out, errOut := runCmd("", "lig", "10.2.0.1", "-i", "1000", "-m", mr.Addr.String())
	if code != 0 {
		t.Fatalf("lig = %d, %s", code, errOut)
	}
	if got := mr.Requests()[0].MapRequest.Records[0]; got.EID.String() != "[1000]10.2.0.1" || got.MaskLen != 32 {
		t.Errorf("requested %s/%d, want [1000]10.2.0.1/32", got.EID, got.MaskLen)
	}
	for _, want := range []string{"Mapping entry for EID [1000]10.2.0.1:\n", "\n[1000]10.2.0.0/16, via map-reply, record ttl: 1440 mins"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestLigNegative(t *testing.T) {
	mr := ligtest.NewResolver(t, ligAnswer(0, false, lisp.MapRecord{
		TTL: 15, EID: lisp.MustParseAddress("10.2.0.0"), MaskLen: 16, Action: lisp.ActionDrop, Authoritative: true,
	}))
	code, out, _ := runCmd("", "lig", "-m", mr.Addr.String(), "10.2.0.1")
	want := "10.2.0.0/16, via map-reply, record ttl: 15 mins, auth, map-version 0\n  negative cache entry, action: drop\n"
	if code != 0 || !strings.HasSuffix(out, want) {
		t.Errorf("lig = %d:\n%s\nwant it to end with:\n%s", code, out, want)
	}
}

// The first request is lost; the second is answered after garbage and
// a spoofed reply, which are reported and skipped.
func TestLigRetryAndIgnore(t *testing.T) {
	mr := ligtest.NewResolver(t, ligAnswer(1, true, ligRecord(lisp.MustParseAddress("10.2.0.0"))))
	// The lost request's try waits its timeout; the answered one's reply
	// takes microseconds, which a second covers on a busy machine.
	code, out, errOut := runCmd("", "lig", "-m", mr.Addr.String(), "-t", "1s", "10.2.0.1")
	if code != 0 {
		t.Fatalf("lig = %d, %s", code, errOut)
	}
	reqs := mr.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	nonce := reqs[1].MapRequest.Nonce
	for _, want := range []string{
		strings.Repeat(fmt.Sprintf("Send map-request to %s for 10.2.0.1 ...\n", mr.Addr), 2),
		fmt.Sprintf("ignoring malformed packet from %s: ", mr.Replier),
		fmt.Sprintf("ignoring map-reply from %s with nonce %#016x, want %#016x\n", mr.Replier, nonce+1, nonce),
		fmt.Sprintf("Received map-reply from %s", mr.Replier),
		"192.0.2.1 ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestLigNoReply(t *testing.T) {
	mr := ligtest.NewResolver(t, func(*ligtest.Request) [][]byte { return nil })
	start := time.Now()
	code, out, errOut := runCmd("", "lig", "-m", mr.Addr.String(), "-c", "3", "-t", "0.1", "10.2.0.1")
	elapsed := time.Since(start)
	if code != 1 || !strings.HasSuffix(out, "\n*** No map-reply received ***\n") || errOut != "" {
		t.Errorf("lig = %d, stdout %q, stderr %q", code, out, errOut)
	}
	if n := len(mr.Requests()); n != 3 || strings.Count(out, "Send map-request") != 3 {
		t.Errorf("%d requests, want 3:\n%s", n, out)
	}
	// Each try waits its whole timeout, and not the default's 2 s: 10
	// times the three timeouts is a program that ignored -t.
	if elapsed < 300*time.Millisecond || elapsed >= 3*time.Second {
		t.Errorf("gave up after %v, want about 3 × 100ms", elapsed)
	}

	code, out, _ = runCmd("", "lig", "-json", "-m", mr.Addr.String(), "-c", "2", "-t", "50ms", "10.2.0.1")
	var got map[string]any
	if err := json.Unmarshal([]byte(out), &got); err != nil || code != 1 ||
		got["error"] != "no map-reply received" || got["tries"] != 2.0 {
		t.Errorf("lig -json = %d, %q (%v)", code, out, err)
	}
}

// The JSON is read back as a script would, with the field names the
// documentation promises.
func TestLigJSON(t *testing.T) {
	mr := ligtest.NewResolver(t, ligAnswer(0, false, ligRecord(lisp.LCAFAddress(&lisp.InstanceID{
		IID: 7, Address: lisp.MustParseAddress("10.2.0.0"),
	}))))
	code, out, errOut := runCmd("", "lig", "--json", "-i", "7", "-m", mr.Addr.String(), "10.2.0.1")
	if code != 0 || errOut != "" {
		t.Fatalf("lig = %d, %s", code, errOut)
	}
	t.Logf("output: %s", out)
	type hop struct {
		Address                   string
		Lookup, RLOCProbe, Strict bool
	}
	var got struct {
		Resolver, Source, EID, Nonce, Replier string
		IID                                   *uint32
		Tries, Ignored, Malformed             int
		RTTMs                                 float64 `json:"rtt_ms"`
		Records                               []struct {
			EID, Action   string
			IID           *uint32
			MaskLen       int `json:"mask_len"`
			TTLMinutes    int `json:"ttl_minutes"`
			MapVersion    int `json:"map_version"`
			Authoritative bool
			Locators      []struct {
				Address                  string
				AFI, Priority, Weight    int
				MPriority                int `json:"m_priority"`
				MWeight                  int `json:"m_weight"`
				Local, Probed, Reachable bool
				ELP                      []struct {
					Address        string
					Lookup, Strict bool
					RLOCProbe      bool `json:"rloc_probe"`
				}
			}
		}
	}
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&got); err != nil {
		t.Fatal(err)
	}
	req := mr.Requests()[0]
	if got.Resolver != mr.Addr.String() || got.Replier != mr.Replier.String() || got.Source != req.From.String() ||
		got.EID != "10.2.0.1" || got.IID == nil || *got.IID != 7 ||
		got.Nonce != fmt.Sprintf("%#016x", req.MapRequest.Nonce) ||
		got.Tries != 1 || got.Ignored != 0 || got.Malformed != 0 || got.RTTMs <= 0 || len(got.Records) != 1 {
		t.Fatalf("result %+v", got)
	}
	rec := got.Records[0]
	if rec.EID != "10.2.0.0" || rec.IID == nil || *rec.IID != 7 || rec.MaskLen != 16 || rec.TTLMinutes != 1440 ||
		rec.Action != "no-action" || !rec.Authoritative || rec.MapVersion != 3 || len(rec.Locators) != 3 {
		t.Fatalf("record %+v", rec)
	}
	l0, l1, l2 := rec.Locators[0], rec.Locators[1], rec.Locators[2]
	if l0.Address != "192.0.2.1" || l0.AFI != 1 || l0.Priority != 1 || l0.Weight != 50 || l0.MPriority != 255 ||
		l0.MWeight != 0 || l0.Local || l0.Probed || !l0.Reachable || l0.ELP != nil {
		t.Errorf("locator 0 %+v", l0)
	}
	if l1.Address != "192.0.2.2" || l1.Priority != 2 || l1.Weight != 100 || !l1.Local || l1.Reachable {
		t.Errorf("locator 1 %+v", l1)
	}
	if l2.AFI != 16387 || l2.Address != "afi-list{(none), elp{192.0.2.10(P) -> 192.0.2.20(P,S) -> 198.51.100.1(L)}}" ||
		l2.MWeight != 10 || len(l2.ELP) != 3 {
		t.Fatalf("locator 2 %+v", l2)
	}
	for i, want := range []hop{{"192.0.2.10", false, true, false}, {"192.0.2.20", false, true, true}, {"198.51.100.1", true, false, false}} {
		h := l2.ELP[i]
		if (hop{h.Address, h.Lookup, h.RLOCProbe, h.Strict}) != want {
			t.Errorf("elp hop %d = %+v, want %+v", i, h, want)
		}
	}
}

func TestLigBadArguments(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "want one EID, got 0 arguments"},
		{[]string{"10.0.0.1", "10.0.0.2"}, "want one EID, got 2 arguments"},
		{[]string{"10.2.0.x"}, "amptcp lig: 10.2.0.x is not an IP address"},
		{[]string{"-c", "0", "10.0.0.1"}, "-c 0: want at least one try"},
		{[]string{"-t", "soon", "10.0.0.1"}, `invalid value "soon" for flag -t: not a duration`},
		{[]string{"-t", "-1s", "10.0.0.1"}, "must be positive"},
		{[]string{"-i", "4294967296", "10.0.0.1"}, "not a 32-bit unsigned number"},
		{[]string{"-s", "here", "10.0.0.1"}, `invalid value "here" for flag -s`},
		{[]string{"-m", "127.0.0.1:http", "10.0.0.1"}, `-m 127.0.0.1:http: bad port "http"`},
		{[]string{"-m", ":4342", "10.0.0.1"}, "-m :4342: no host"},
		{[]string{"-frobnicate", "10.0.0.1"}, "flag provided but not defined: -frobnicate"},
	} {
		code, out, errOut := runCmd("", append([]string{"lig"}, tc.args...)...)
		if code != 2 || out != "" || !strings.Contains(errOut, tc.want) {
			t.Errorf("lig %q = %d, stdout %q, stderr %q; want 2 and %q", tc.args, code, out, errOut, tc.want)
		}
	}
	if code, _, errOut := runCmd("", "lig", "-h"); code != 0 || !strings.Contains(errOut, "usage: amptcp lig") {
		t.Errorf("lig -h = %d, %q", code, errOut)
	}
}

// lig -trace sends DDT Map-Requests (the D bit) and says when the node
// it starts at gives no Map-Referral.
func TestLigTraceNoReferral(t *testing.T) {
	node := ligtest.NewResolver(t, func(*ligtest.Request) [][]byte { return nil })
	code, out, _ := runCmd("", "lig", "-trace", "-m", node.Addr.String(), "-c", "2", "-t", "100ms", "10.2.0.1")
	if code != 1 || !strings.Contains(out, "*** No map-referral received ***") {
		t.Errorf("lig -trace = %d:\n%s", code, out)
	}
	reqs := node.Requests()
	if len(reqs) != 2 || !reqs[0].ECM.DDT || reqs[0].MapRequest.Nonce != reqs[1].MapRequest.Nonce {
		t.Errorf("%d requests; want 2 DDT Map-Requests with the trace's one nonce", len(reqs))
	}
	code, out, _ = runCmd("", "lig", "-trace", "-json", "-m", node.Addr.String(), "-c", "1", "-t", "50ms", "10.2.0.1")
	var res struct {
		Error string `json:"error"`
		Tries int    `json:"tries"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != 1 || res.Error != "lig: no map-referral received" || res.Tries != 1 {
		t.Errorf("lig -trace -json = %d, %+v (%v):\n%s", code, res, err, out)
	}
}
