// Package e2e holds the end-to-end tests: the real binaries in network
// namespaces that the tests build themselves, with real UDP between them.
package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/amptcp/amptcp/daemon"
	"github.com/amptcp/amptcp/internal/testenv"
	"github.com/amptcp/amptcp/internal/testnet"
	"github.com/amptcp/amptcp/lisp"
)

// bin holds lispd and amptcp, built once for the package.
var bin string

func TestMain(m *testing.M) {
	testenv.MainWithBinaries(m, &bin, "github.com/amptcp/amptcp/cmd/lispd", "github.com/amptcp/amptcp/cmd/amptcp")
}

// mappingNet is a map-server/resolver (ms) routing between two ETRs and
// an ITR, each on its own link:
//
//	etr1 10.0.1.2 --- 10.0.1.1 ms 10.0.3.1 --- 10.0.3.2 itr
//	                    10.0.2.1                fd00:3::2
//	                       |
//	etr2 10.0.2.2 ---------+
type mappingNet struct {
	ms, etr1, etr2, itr *testnet.Node
	msLinks             map[string]*testnet.Link
}

func newMappingNet(t *testing.T) *mappingNet {
	n := testnet.New(t)
	m := &mappingNet{ms: n.Node("ms"), etr1: n.Node("etr1"), etr2: n.Node("etr2"), itr: n.Node("itr"),
		msLinks: map[string]*testnet.Link{}}
	m.ms.EnableForwarding()
	m.msLinks["etr1"] = n.Link(m.ms, m.etr1, "10.0.1.1/24", "10.0.1.2/24")
	m.msLinks["etr2"] = n.Link(m.ms, m.etr2, "10.0.2.1/24", "10.0.2.2/24")
	m.msLinks["itr"] = n.Link(m.ms, m.itr, "10.0.3.1/24,fd00:3::1/64", "10.0.3.2/24,fd00:3::2/64")
	m.etr1.AddRoute("default", "10.0.1.1")
	m.etr2.AddRoute("default", "10.0.2.1")
	m.itr.AddRoute("default", "10.0.3.1")
	return m
}

const (
	keyA       = "site-a secret"
	keyB       = "site-b secret"
	metricsURL = "http://127.0.0.1:9342/metrics"
)

func lispdConfig(sock string) string {
	return `
roles: [map-server, map-resolver]
listen: ["0.0.0.0", "::"]
log: {level: debug}
metrics: {listen: "127.0.0.1:9342"}
control: {socket: ` + sock + `}
map-server:
  registration-timeout: 3s
  sites:
    - name: site-a
      keys: [{id: 0, secret: "` + keyA + `"}]
      eid-prefixes:
        - {prefix: 10.1.0.0/16}
        - {prefix: 10.3.0.0/16}
        - {prefix: 10.4.0.0/16}
        - {prefix: "2001:db8:a::/48"}
    - name: site-b
      keys: [{id: 0, secret: "` + keyB + `"}]
      eid-prefixes: [{prefix: 10.2.0.0/16}]
map-resolver: {negative-ttl: 15m, unregistered-ttl: 1m}
`
}

// startLispd runs the lispd binary in the ms node and waits until its
// control socket answers.
func startLispd(t *testing.T, nd *testnet.Node) (sock string) {
	t.Helper()
	dir := t.TempDir()
	sock = filepath.Join(dir, "lispd.sock")
	cfg := filepath.Join(dir, "lispd.yaml")
	if err := os.WriteFile(cfg, []byte(lispdConfig(sock)), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := nd.Exec(t, filepath.Join(bin, "lispd"), "-config", cfg, "-check"); err != nil {
		t.Fatalf("lispd -check: %v\n%s", err, out)
	}
	p := nd.Start(t, filepath.Join(bin, "lispd"), "-config", cfg)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := daemon.QueryStatus(sock); err == nil {
			return sock
		}
		if time.Now().After(deadline) {
			t.Fatalf("lispd did not start:\n%s", p.Output())
		}
	}
}

// ligJSON runs `amptcp lig --json` in the itr node.
type ligLocator struct {
	Address   string `json:"address"`
	Reachable bool   `json:"reachable"`
	ELP       []struct {
		Address   string `json:"address"`
		RLOCProbe bool   `json:"rloc_probe"`
		Strict    bool   `json:"strict"`
		Lookup    bool   `json:"lookup"`
	} `json:"elp"`
}

type ligOutput struct {
	Replier string `json:"replier"`
	Error   string `json:"error"`
	Records []struct {
		EID           string       `json:"eid"`
		MaskLen       int          `json:"mask_len"`
		TTL           int          `json:"ttl_minutes"`
		Action        string       `json:"action"`
		Authoritative bool         `json:"authoritative"`
		Locators      []ligLocator `json:"locators"`
	} `json:"records"`
}

func lig(t *testing.T, nd *testnet.Node, resolver, eid string) ligOutput {
	t.Helper()
	out, err := nd.Exec(t, filepath.Join(bin, "amptcp"), "lig", "-m", resolver, "-c", "3", "-t", "1s", "--json", eid)
	var res ligOutput
	if jerr := json.Unmarshal([]byte(out), &res); jerr != nil || err != nil {
		t.Fatalf("amptcp lig %s: %v %v\n%s", eid, err, jerr, out)
	}
	return res
}

func record(eid string, rlocs ...lisp.Address) lisp.MapRecord {
	p := netip.MustParsePrefix(eid)
	rec := lisp.MapRecord{TTL: 3, EID: lisp.IPAddress(p.Addr()), MaskLen: uint8(p.Bits())}
	for _, a := range rlocs {
		rec.Locators = append(rec.Locators, lisp.Locator{Priority: 1, Weight: 50, Reachable: true, Address: a})
	}
	return rec
}

// TestMappingSystem runs lispd as map-server and map-resolver in one
// namespace, ETRs registering from two others, and `amptcp lig` asking
// from a fourth, with tshark listening.
func TestMappingSystem(t *testing.T) {
	tshark := testenv.RequireTool(t, "tshark")
	net4 := newMappingNet(t)
	pcap := filepath.Join(t.TempDir(), "ms.pcap")
	capture := net4.ms.Start(t, tshark, "-i", "any", "-f", "udp port 4342", "-w", pcap)
	waitCapturing(t, capture)
	sock := startLispd(t, net4.ms)
	ms := netip.MustParseAddrPort("10.0.1.1:4342")
	etr1 := newETR(t, net4.etr1, "10.0.1.2:4342", ms, keyA)
	etr2 := newETR(t, net4.etr2, "10.0.2.2:4342", netip.MustParseAddrPort("10.0.2.1:4342"), keyB)
	path := lisp.LCAFAddress(&lisp.AFIList{Addresses: []lisp.Address{{}, lisp.LCAFAddress(&lisp.ELP{Hops: []lisp.ELPHop{
		{Address: lisp.MustParseAddress("192.0.2.11"), RLOCProbe: true},
		{Address: lisp.MustParseAddress("192.0.2.12"), Strict: true},
		{Address: lisp.MustParseAddress("10.0.1.2")},
	}})}})

	var firstNotify string // the nonce of the first Map-Notify, which tshark decodes
	t.Run("proxy reply with RLOCs and ELPs", func(t *testing.T) {
		n := etr1.register(&lisp.MapRegister{ProxyReply: true, Records: []lisp.MapRecord{
			record("10.1.0.0/16", lisp.MustParseAddress("10.0.1.2"), path),
		}})
		if len(n.Records) != 1 || n.Records[0].MaskLen != 16 {
			t.Errorf("Map-Notify records: %s", n)
		}
		firstNotify = fmt.Sprintf("%#016x", n.Nonce)
		res := lig(t, net4.itr, "10.0.3.1", "10.1.2.3")
		if len(res.Records) != 1 || res.Records[0].EID != "10.1.0.0" || res.Records[0].MaskLen != 16 || res.Records[0].Authoritative {
			t.Fatalf("lig: %+v", res)
		}
		locs := res.Records[0].Locators
		if len(locs) != 2 || locs[0].Address != "10.0.1.2" || len(locs[1].ELP) != 3 {
			t.Fatalf("locators: %+v", locs)
		}
		hops := locs[1].ELP
		if hops[0].Address != "192.0.2.11" || !hops[0].RLOCProbe || hops[1].Address != "192.0.2.12" || !hops[1].Strict ||
			hops[2].Address != "10.0.1.2" || hops[2].RLOCProbe || hops[2].Strict {
			t.Errorf("ELP hops: %+v", hops)
		}
		if !strings.HasPrefix(res.Replier, "10.0.3.1") {
			t.Errorf("replier %s, want the map-server", res.Replier)
		}
	})

	t.Run("IPv6 EID over IPv6", func(t *testing.T) {
		etr1.register(&lisp.MapRegister{ProxyReply: true, Records: []lisp.MapRecord{
			record("2001:db8:a::/48", lisp.MustParseAddress("10.0.1.2")),
		}})
		res := lig(t, net4.itr, "fd00:3::1", "2001:db8:a::1")
		if len(res.Records) != 1 || res.Records[0].EID != "2001:db8:a::" || res.Records[0].Locators[0].Address != "10.0.1.2" {
			t.Errorf("lig over IPv6: %+v", res)
		}
	})

	t.Run("forwarded to the ETR without proxy reply", func(t *testing.T) {
		etr2.register(&lisp.MapRegister{Records: []lisp.MapRecord{
			record("10.2.0.0/16", lisp.MustParseAddress("10.0.2.2")),
		}})
		res := lig(t, net4.itr, "10.0.3.1", "10.2.0.9")
		if !strings.HasPrefix(res.Replier, "10.0.2.2") || len(res.Records) != 1 || !res.Records[0].Authoritative {
			t.Errorf("lig: %+v, want an authoritative reply from the ETR", res)
		}
		if etr2.answers() != 1 {
			t.Errorf("the ETR answered %d forwarded Map-Requests", etr2.answers())
		}
	})

	t.Run("two ETRs of one site merged", func(t *testing.T) {
		// A second ETR of site a, in the etr2 node.
		etr2a := newETR(t, net4.etr2, "10.0.2.2:0", netip.MustParseAddrPort("10.0.2.1:4342"), keyA)
		for i, e := range []*etr{etr1, etr2a} {
			rloc := []string{"10.0.1.2", "10.0.2.2"}[i]
			e.register(&lisp.MapRegister{ProxyReply: true, MergeRequest: true,
				XTRID:   &lisp.XTRID{ID: [16]byte{byte(i + 1)}, SiteID: 7},
				Records: []lisp.MapRecord{record("10.3.0.0/16", lisp.MustParseAddress(rloc))}})
		}
		res := lig(t, net4.itr, "10.0.3.1", "10.3.0.1")
		var got []string
		for _, l := range res.Records[0].Locators {
			got = append(got, l.Address)
		}
		if !slices.Equal(got, []string{"10.0.1.2", "10.0.2.2"}) {
			t.Errorf("merged locators %v", got)
		}
	})

	t.Run("refused registrations change nothing", func(t *testing.T) {
		before := mappingsOf(t, sock)
		for _, key := range []string{"wrong key", keyB} { // keyB is the other site's
			m := &lisp.MapRegister{ProxyReply: true, Auth: lisp.Auth{Algorithm: lisp.AuthHMACSHA256},
				Records: []lisp.MapRecord{record("10.1.0.0/16", lisp.MustParseAddress("203.0.113.66"))}}
			b, err := m.AppendSigned(nil, []byte(key))
			if err != nil {
				t.Fatal(err)
			}
			etr1.send(b)
		}
		waitFor(t, "the refusals to be counted", func() bool {
			c, err := daemon.QueryCounters(sock)
			return err == nil && c.MapRegisters["auth-failed"] == 2
		})
		if after := mappingsOf(t, sock); after != before {
			t.Errorf("mappings changed:\n%s\n%s", before, after)
		}
		res := lig(t, net4.itr, "10.0.3.1", "10.1.0.1")
		if res.Records[0].Locators[0].Address != "10.0.1.2" {
			t.Errorf("after the hijack attempts: %+v", res.Records[0].Locators)
		}
	})

	t.Run("registration expiry", func(t *testing.T) {
		etr1.registerOnce(&lisp.MapRegister{ProxyReply: true, Records: []lisp.MapRecord{
			record("10.4.0.0/16", lisp.MustParseAddress("10.0.1.2")),
		}})
		if res := lig(t, net4.itr, "10.0.3.1", "10.4.0.1"); len(res.Records[0].Locators) != 1 {
			t.Fatalf("before expiry: %+v", res)
		}
		waitFor(t, "the registration to expire", func() bool {
			return !strings.Contains(statusOf(t, sock), `"eid":"10.4.0.0/16"`)
		})
		res := lig(t, net4.itr, "10.0.3.1", "10.4.0.1")
		if rec := res.Records[0]; len(rec.Locators) != 0 || rec.Action != "natively-forward" || rec.TTL != 1 || rec.EID != "10.4.0.0" {
			t.Errorf("after expiry: %+v, want a 1-minute negative reply for 10.4.0.0/16", rec)
		}
	})

	t.Run("lispd status", func(t *testing.T) {
		out, err := net4.ms.Exec(t, filepath.Join(bin, "lispd"), "status", "-socket", sock)
		if err != nil {
			t.Fatalf("lispd status: %v\n%s", err, out)
		}
		for _, want := range []string{"site site-a", "site site-b", "10.1.0.0/16  proxy-reply", "10.2.0.0/16  forward to ETR",
			"locator elp{192.0.2.11(P) -> 192.0.2.12(S) -> 10.0.1.2}", "registered by 10.0.1.2:4342",
			"xtr-id 02000000000000000000000000000000 site-id 7 (merge)", "auth-failed 2"} {
			if !strings.Contains(out, want) {
				t.Errorf("lispd status lacks %q:\n%s", want, out)
			}
		}
	})

	t.Run("metrics", func(t *testing.T) {
		m := scrape(t, net4.ms)
		// The ETRs keep refreshing: at least the 7 first registrations.
		for metric, want := range map[string]float64{
			`lispd_map_registers_total{result="accepted"}`:    7,
			`lispd_map_registers_total{result="auth-failed"}`: 2,
			`lispd_map_requests_forwarded_total`:              1,
			`lispd_map_reply_records_total{kind="negative"}`:  1,
			`lispd_registrations`:                             4,
		} {
			if got, ok := m[metric]; !ok || got < want || (strings.Contains(metric, "auth-failed") && got != want) {
				t.Errorf("%s = %v, want %v", metric, got, want)
			}
		}
	})

	t.Run("tshark decodes what lispd sent", func(t *testing.T) {
		if err := capture.Stop(); err != nil && !strings.Contains(err.Error(), "signal") {
			t.Logf("tshark: %v", err)
		}
		out, err := exec.Command(tshark, "-r", pcap, "-T", "fields", "-E", "occurrence=a", "-E", "separator=|",
			"-e", "ip.src", "-e", "lisp.type", "-e", "lisp.nonce", "-e", "lisp.authlen", "-e", "lisp.loc.locator",
			"-e", "lisp.lcaf.elp_hop.ipv4", "-e", "_ws.expert.message").Output()
		if err != nil {
			t.Fatalf("tshark -r: %v", err)
		}
		var notify, reply bool
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			f := strings.Split(line, "|")
			switch {
			case strings.HasPrefix(f[0], "10.0.1.1") && f[1] == "4" && f[2] == firstNotify && f[3] == "32":
				notify = true // the Map-Notify for the first registration
			case strings.HasPrefix(f[0], "10.0.3.1") && f[1] == "2" && strings.Contains(f[4], "10.0.1.2"):
				reply = true // a proxy Map-Reply to the ITR
			}
			// Wireshark guesses traceroute from any UDP port in 33435-33464, which an ETR's
			// ephemeral source port sometimes is: a remark on the port, not on the LISP.
			expert := strings.Trim(tracerouteRemark.ReplaceAllString(f[6], ""), ",")
			if expert != "" && !strings.Contains(expert, "Unexpected AFI (0)") { // Wireshark 4.0 and lispers.net-style paths
				t.Errorf("tshark expert: %s in %s", expert, line)
			}
		}
		if !notify || !reply {
			t.Errorf("tshark saw Map-Notify %v, proxy Map-Reply %v:\n%s", notify, reply, out)
		}
	})
}

var tracerouteRemark = regexp.MustCompile(`Possible traceroute: hop #\d+, attempt #\d+,?`)

func statusOf(t *testing.T, sock string) string {
	t.Helper()
	st, err := daemon.QueryStatus(sock)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(st.MapServer)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// mappingsOf is what the map-server holds, EID-prefixes and locators,
// without the times that the ETRs' refreshes move.
func mappingsOf(t *testing.T, sock string) string {
	t.Helper()
	st, err := daemon.QueryStatus(sock)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, site := range st.MapServer.Sites {
		for _, r := range site.Registrations {
			fmt.Fprintf(&b, "%s %s %v\n", site.Name, r.EID, r.Locators)
		}
	}
	return b.String()
}

// scrape reads the metrics endpoint inside nd, by name with labels.
func scrape(t *testing.T, nd *testnet.Node) map[string]float64 {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return nd.Dial(ctx, &net.Dialer{}, network, addr)
		},
	}}
	resp, err := client.Get(metricsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	metrics := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		var v float64
		if name, value, ok := strings.Cut(line, " "); ok && !strings.HasPrefix(line, "#") {
			if _, err := fmt.Sscan(value, &v); err == nil {
				metrics[name] = v
			}
		}
	}
	return metrics
}

// waitCapturing waits until tshark captures: "Capturing on" comes when
// it opens its interfaces, "Capture started" once the capture runs, which
// on a busy machine is long enough after for the first packets to pass
// uncaptured.
func waitCapturing(t testing.TB, capture *testnet.Process) {
	t.Helper()
	waitFor(t, "tshark to capture", func() bool { return strings.Contains(capture.Output(), "Capture started") })
}

func waitFor(t testing.TB, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); !ok(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
