package lig

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/amptcp/amptcp/lig/ligtest"
	"github.com/amptcp/amptcp/lisp"
)

var eid = netip.MustParseAddr("10.2.0.1")

func hop(a string, l, p, s bool) lisp.ELPHop {
	return lisp.ELPHop{Address: lisp.MustParseAddress(a), Lookup: l, RLOCProbe: p, Strict: s}
}

func elp(hops ...lisp.ELPHop) lisp.Address { return lisp.LCAFAddress(&lisp.ELP{Hops: hops}) }

func afiList(a ...lisp.Address) lisp.Address {
	return lisp.LCAFAddress(&lisp.AFIList{Addresses: a})
}

// pathRecord is a mapping with every way a locator can be written: a
// plain RLOC up and one down, an ELP after AFI 0 in an AFI List (as
// lispers.net sends a path), an ELP next to its RLOC, and a bare ELP.
func pathRecord(prefix lisp.Address) lisp.MapRecord {
	loc := func(a lisp.Address, up bool) lisp.Locator {
		return lisp.Locator{Priority: 1, Weight: 50, MPriority: 255, Reachable: up, Address: a}
	}
	down := loc(lisp.MustParseAddress("192.0.2.2"), false)
	down.Local, down.Probed = true, true
	return lisp.MapRecord{
		TTL: 1440, EID: prefix, MaskLen: 16, Authoritative: true, MapVersion: 7,
		Locators: []lisp.Locator{
			loc(lisp.MustParseAddress("192.0.2.1"), true),
			down,
			loc(afiList(lisp.Address{}, elp(hop("192.0.2.10", false, true, false),
				hop("192.0.2.20", false, true, true), hop("198.51.100.1", false, false, false))), true),
			loc(afiList(lisp.MustParseAddress("198.51.100.2"), elp(hop("192.0.2.30", true, false, true))), true),
			loc(elp(hop("192.0.2.40", false, false, false), hop("198.51.100.3", false, false, false)), true),
		},
	}
}

func answer(records ...lisp.MapRecord) ligtest.Handler {
	return func(req *ligtest.Request) [][]byte { return [][]byte{req.Reply(records...)} }
}

// options asks mr with a timeout that only a lost request outlasts: a
// reply over loopback takes microseconds, and a busy machine's
// milliseconds must not make a try time out.
func options(mr *ligtest.Resolver, logf func(string, ...any)) Options {
	return Options{Resolver: mr.Addr, Tries: 3, Timeout: time.Second, Logf: logf}
}

// lines collects what Query logs, as the CLI prints it.
type lines struct{ strings.Builder }

func (l *lines) logf(format string, args ...any) { fmt.Fprintf(l, format+"\n", args...) }

func TestQueryPaths(t *testing.T) {
	mr := ligtest.NewResolver(t, answer(pathRecord(lisp.MustParseAddress("10.2.0.0"))))
	var log lines
	res, err := Query(context.Background(), eid, options(mr, log.logf))
	if err != nil {
		t.Fatal(err)
	}
	if res.Tries != 1 || res.Replier != mr.Replier || res.Resolver != mr.Addr || res.RTT <= 0 || res.Ignored+res.Malformed != 0 {
		t.Errorf("result %+v; want 1 try answered by %s", res, mr.Replier)
	}
	// What went on the wire: one request, its reply address the socket.
	reqs := mr.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	req := reqs[0]
	if req.ECM.Source != res.Source || req.From != res.Source || req.ECM.Destination.String() != "10.2.0.1:4342" {
		t.Errorf("request from %s, inner %s -> %s; socket %s", req.From, req.ECM.Source, req.ECM.Destination, res.Source)
	}
	if req.MapRequest.Nonce != res.Nonce || req.MapRequest.Records[0].EID.String() != "10.2.0.1" || req.MapRequest.Records[0].MaskLen != 32 {
		t.Errorf("map-request %s; result nonce %#x", req.MapRequest, res.Nonce)
	}

	var out strings.Builder
	if err := WriteText(&out, res); err != nil {
		t.Fatal(err)
	}
	text := log.String() + out.String()
	t.Logf("output:\n%s", text)
	for _, want := range []string{
		fmt.Sprintf("Send map-request to %s for 10.2.0.1 ...\n", mr.Addr),
		fmt.Sprintf("Received map-reply from %s with rtt ", mr.Replier),
		"Mapping entry for EID 10.2.0.1:\n",
		"10.2.0.0/16, via map-reply, record ttl: 1440 mins, auth, map-version 7\n",
		"  192.0.2.1                           up     1/50             255/0                R\n",
		"  192.0.2.2                           down   1/50             255/0                Lp\n",
		"  (path)                              up     1/50             255/0                R\n" +
			"    elp 192.0.2.10(P) -> 192.0.2.20(P,S) -> 198.51.100.1\n",
		"  198.51.100.2                        up     1/50             255/0                R\n" +
			"    elp 192.0.2.30(L,S)\n",
		"    elp 192.0.2.40 -> 198.51.100.3\n",
		"(elp hop bits: L lookup, P rloc-probe, S strict)",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

func TestQueryInstanceID(t *testing.T) {
	prefix := lisp.LCAFAddress(&lisp.InstanceID{IID: 1000, Address: lisp.MustParseAddress("10.2.0.0")})
	mr := ligtest.NewResolver(t, answer(pathRecord(prefix)))
	opts := options(mr, nil)
	opts.IID, opts.HasIID = 1000, true
	res, err := Query(context.Background(), eid, opts)
	if err != nil {
		t.Fatal(err)
	}
	if got := mr.Requests()[0].MapRequest.Records[0].EID.String(); got != "[1000]10.2.0.1" {
		t.Errorf("requested %s, want [1000]10.2.0.1", got)
	}
	var out strings.Builder
	WriteText(&out, res)
	for _, want := range []string{"Mapping entry for EID [1000]10.2.0.1:", "\n[1000]10.2.0.0/16, via map-reply"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestQuerySourceEID: -e puts the source EID in the request, in the
// instance of the EID asked.
func TestQuerySourceEID(t *testing.T) {
	mr := ligtest.NewResolver(t, answer(pathRecord(lisp.LCAFAddress(&lisp.InstanceID{IID: 7, Address: lisp.MustParseAddress("10.2.0.0")}))))
	opts := options(mr, nil)
	opts.IID, opts.HasIID, opts.SourceEID = 7, true, netip.MustParseAddr("10.1.0.9")
	if _, err := Query(context.Background(), eid, opts); err != nil {
		t.Fatal(err)
	}
	if got := mr.Requests()[0].MapRequest.SourceEID.String(); got != "[7]10.1.0.9" {
		t.Errorf("source EID %s, want [7]10.1.0.9", got)
	}
	opts.SourceEID = netip.Addr{}
	Query(context.Background(), eid, opts)
	if got := mr.Requests()[1].MapRequest.SourceEID; !got.IsZero() {
		t.Errorf("source EID %s without -e", got)
	}
}

func TestQueryNegative(t *testing.T) {
	mr := ligtest.NewResolver(t, answer(lisp.MapRecord{
		TTL: 15, EID: lisp.MustParseAddress("10.0.0.0"), MaskLen: 8, Action: lisp.ActionNativelyForward,
	}))
	res, err := Query(context.Background(), eid, options(mr, nil))
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	WriteText(&out, res)
	want := "10.0.0.0/8, via map-reply, record ttl: 15 mins, not auth, map-version 0\n" +
		"  negative cache entry, action: natively-forward\n"
	if !strings.HasSuffix(out.String(), want) {
		t.Errorf("output:\n%s\nwant it to end with:\n%s", out.String(), want)
	}
}

// The first request is lost: the second try gets the answer, with a new
// nonce.
func TestQueryRetries(t *testing.T) {
	mr := ligtest.NewResolver(t, func(req *ligtest.Request) [][]byte {
		if req.N == 1 {
			return nil
		}
		return [][]byte{req.Reply(pathRecord(lisp.MustParseAddress("10.2.0.0")))}
	})
	res, err := Query(context.Background(), eid, options(mr, nil))
	if err != nil {
		t.Fatal(err)
	}
	reqs := mr.Requests()
	if res.Tries != 2 || len(reqs) != 2 || res.Nonce != reqs[1].MapRequest.Nonce || reqs[0].MapRequest.Nonce == reqs[1].MapRequest.Nonce {
		t.Errorf("tries %d, %d requests, answered nonce %#x; want the second of two, with a new nonce", res.Tries, len(reqs), res.Nonce)
	}
	if res.RTT >= time.Second {
		t.Errorf("rtt %v counts the first, lost try", res.RTT)
	}
}

// A reply to an earlier try that arrives during a later one is still the
// answer: each nonce sent stays valid.
func TestQueryAcceptsLateReply(t *testing.T) {
	var first *ligtest.Request
	mr := ligtest.NewResolver(t, func(req *ligtest.Request) [][]byte {
		if req.N == 1 {
			first = req
			return nil
		}
		return [][]byte{first.Reply(pathRecord(lisp.MustParseAddress("10.2.0.0")))}
	})
	res, err := Query(context.Background(), eid, options(mr, nil))
	if err != nil {
		t.Fatal(err)
	}
	if reqs := mr.Requests(); res.Tries != 2 || res.Nonce != reqs[0].MapRequest.Nonce || res.RTT < time.Second {
		t.Errorf("tries %d, nonce %#x, rtt %v; want the first request's nonce and its rtt", res.Tries, res.Nonce, res.RTT)
	}
}

// Before the answer come garbage, a reply with a wrong nonce and a
// message that is not a reply: each is counted and logged, none accepted.
func TestQueryIgnoresSpoofsAndGarbage(t *testing.T) {
	mr := ligtest.NewResolver(t, func(req *ligtest.Request) [][]byte {
		spoof := req.ReplyWithNonce(req.MapRequest.Nonce^1, lisp.MapRecord{
			TTL: 1, EID: lisp.MustParseAddress("10.2.0.0"), MaskLen: 16,
			Locators: []lisp.Locator{{Reachable: true, Address: lisp.MustParseAddress("203.0.113.66")}},
		})
		echo, _ := req.MapRequest.AppendBinary(nil) // well-formed, but no reply
		return [][]byte{{0xde, 0xad}, spoof, echo, req.Reply(pathRecord(lisp.MustParseAddress("10.2.0.0")))}
	})
	var log lines
	res, err := Query(context.Background(), eid, options(mr, log.logf))
	if err != nil {
		t.Fatal(err)
	}
	if res.Malformed != 1 || res.Ignored != 2 || res.Tries != 1 || res.Reply.Records[0].Locators[0].Address.String() != "192.0.2.1" {
		t.Errorf("malformed %d, ignored %d, tries %d, reply %s", res.Malformed, res.Ignored, res.Tries, res.Reply)
	}
	for _, want := range []string{
		fmt.Sprintf("ignoring malformed packet from %s: ", mr.Replier),
		fmt.Sprintf("ignoring map-reply from %s with nonce %#016x, want %#016x\n", mr.Replier, res.Nonce^1, res.Nonce),
		fmt.Sprintf("ignoring Map-Request from %s\n", mr.Replier),
	} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, log.String())
		}
	}
}

func TestQueryNoReply(t *testing.T) {
	mr := ligtest.NewResolver(t, func(*ligtest.Request) [][]byte { return nil })
	opts := options(mr, nil)
	opts.Timeout = 100 * time.Millisecond
	start := time.Now()
	res, err := Query(context.Background(), eid, opts)
	elapsed := time.Since(start)
	if !errors.Is(err, ErrNoReply) || res == nil || res.Tries != 3 || len(mr.Requests()) != 3 {
		t.Fatalf("err %v, result %+v, %d requests; want ErrNoReply after 3 tries", err, res, len(mr.Requests()))
	}
	// Each try waits its whole timeout, and not the default's 2 s: 10
	// times the three timeouts is a program that ignored them.
	if elapsed < 300*time.Millisecond || elapsed >= 3*time.Second {
		t.Errorf("gave up after %v, want about 300ms", elapsed)
	}
	if err := WriteText(&strings.Builder{}, res); !errors.Is(err, ErrNoReply) {
		t.Errorf("WriteText without a reply: %v", err)
	}
}

func TestQueryCancel(t *testing.T) {
	mr := ligtest.NewResolver(t, func(*ligtest.Request) [][]byte { return nil })
	ctx, cancel := context.WithCancel(context.Background())
	opts := options(mr, nil)
	opts.Timeout = time.Minute
	time.AfterFunc(50*time.Millisecond, cancel)
	start := time.Now()
	res, err := Query(ctx, eid, opts)
	if !errors.Is(err, context.Canceled) || res == nil || res.Tries != 1 {
		t.Fatalf("err %v, result %+v; want context.Canceled during the first try", err, res)
	}
	if elapsed := time.Since(start); elapsed > 10*time.Second {
		t.Errorf("cancel took %v", elapsed)
	}
}

func TestQueryErrors(t *testing.T) {
	mr := netip.MustParseAddrPort("127.0.0.1:4342")
	for _, tc := range []struct {
		name string
		eid  netip.Addr
		opts Options
		want string
	}{
		{"no EID", netip.Addr{}, Options{Resolver: mr}, "lig: no EID"},
		{"no resolver", eid, Options{}, "lig: no map-resolver"},
		{"families differ", eid, Options{Resolver: mr, Source: netip.MustParseAddr("::1")},
			"lig: source ::1 and map-resolver 127.0.0.1 differ in address family"},
		{"source not local", eid, Options{Resolver: mr, Source: netip.MustParseAddr("192.0.2.99")},
			"lig: listen on 192.0.2.99: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Query(context.Background(), tc.eid, tc.opts)
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) || res != nil {
				t.Errorf("Query = %v, %v; want error %q", res, err, tc.want)
			}
		})
	}
}

func TestSplitLocator(t *testing.T) {
	path := elp(hop("192.0.2.10", false, true, false))
	rloc := lisp.MustParseAddress("192.0.2.1")
	kv := lisp.LCAFAddress(&lisp.KeyValue{Key: rloc, Value: rloc})
	for _, tc := range []struct {
		in       lisp.Address
		rloc     string
		elpFound bool
	}{
		{rloc, "192.0.2.1", false},
		{path, "(none)", true},
		{afiList(lisp.Address{}, path), "(none)", true},
		{afiList(rloc, path), "192.0.2.1", true},
		{afiList(rloc, kv, path), "afi-list{192.0.2.1, kv{192.0.2.1 => 192.0.2.1}}", true},
		{afiList(rloc, kv), "afi-list{192.0.2.1, kv{192.0.2.1 => 192.0.2.1}}", false},
		{kv, "kv{192.0.2.1 => 192.0.2.1}", false},
	} {
		r, e := splitLocator(tc.in)
		if r.String() != tc.rloc || (e != nil) != tc.elpFound {
			t.Errorf("splitLocator(%s) = %s, %v; want %s, elp %v", tc.in, r, e, tc.rloc, tc.elpFound)
		}
	}
}
