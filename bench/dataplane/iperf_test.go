package dataplane

import (
	"os"
	"strings"
	"testing"
)

// The files in testdata/ are real `iperf3 -J` outputs of iperf 3.12
// (Debian 12) between two namespaces joined by a veth pair:
// `iperf3 -c 10.9.0.2 -t 1 -P N -C cubic -J`, and the same against no
// server.
func TestParseIperf(t *testing.T) {
	for _, tc := range []struct {
		file string
		want Iperf
	}{
		{"iperf3-tcp-1stream.json", Iperf{
			Version: "iperf 3.12", Streams: 1, Seconds: 1.000601, Bytes: 6250037248,
			ReceivedBitsPerSecond: 49970265854.2216, SentBitsPerSecond: 49998648028.61506, Retransmits: 0,
			SenderCPU: 97.4817496747343, ReceiverCPU: 64.35658505677515,
			SenderCongestion: "cubic", ReceiverCongestion: "cubic",
		}},
		{"iperf3-tcp-4streams.json", Iperf{
			Version: "iperf 3.12", Streams: 4, Seconds: 1.00101, Bytes: 2653552640,
			ReceivedBitsPerSecond: 21207002047.93159, SentBitsPerSecond: 21208506332.55373, Retransmits: 78,
			SenderCPU: 41.755254604119344, ReceiverCPU: 92.9293040289381,
			SenderCongestion: "cubic", ReceiverCongestion: "cubic",
		}},
	} {
		b, err := os.ReadFile("testdata/" + tc.file)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ParseIperf(b)
		if err != nil {
			t.Fatalf("%s: %v", tc.file, err)
		}
		if *got != tc.want {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.file, *got, tc.want)
		}
	}
}

func TestParseIperfErrors(t *testing.T) {
	refused, err := os.ReadFile("testdata/iperf3-refused.json")
	if err != nil {
		t.Fatal(err)
	}
	good, err := os.ReadFile("testdata/iperf3-tcp-1stream.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, in, want string
	}{
		{"iperf3's error", string(refused), "iperf3: unable to connect to server: Connection refused"},
		{"not JSON", "iperf3: parameter error", "read iperf3's output: invalid character"},
		{"empty", "", "read iperf3's output: unexpected end of JSON input"},
		{"UDP", strings.Replace(string(good), `"protocol":	"TCP"`, `"protocol":	"UDP"`, 1), `protocol "UDP", want TCP`},
		{"reverse", strings.Replace(string(good), `"reverse":	0`, `"reverse":	1`, 1), "a reverse (-R) run"},
		{"no end", `{"start": {"test_start": {"protocol": "TCP"}}, "end": {}}`, "no end.sum_sent"},
		{"no time", `{"start": {"test_start": {"protocol": "TCP"}}, "end": {"sum_sent": {}, "sum_received": {}}}`, "measured no time"},
	} {
		_, err := ParseIperf([]byte(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}
