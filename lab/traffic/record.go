package traffic

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"sync"
	"time"

	"github.com/amptcp/amptcp/internal/jsonl"
)

// RecordKind says what a Record describes.
type RecordKind uint8

// The kinds of record.
const (
	// KindSubflow: the sender's view of one TCP subflow of an MPTCP
	// connection (Subflow, Local, Remote set), or of a plain TCP
	// connection (Subflow 0), from its struct tcp_info.
	KindSubflow RecordKind = iota + 1
	// KindConnection: the sender's view of a whole MPTCP connection, from
	// its struct mptcp_info.
	KindConnection
	// KindReceiver: what the receiving application got: bytes, goodput
	// over the interval, in-order delivery jitter; for UDP, datagrams and
	// losses.
	KindReceiver
	// KindResult: a flow's end at one end (see Result).
	KindResult
)

var recordKindNames = []string{KindSubflow: "subflow", KindConnection: "connection", KindReceiver: "receiver", KindResult: "result"}

func (k RecordKind) String() string               { return enumString(recordKindNames, k) }
func (k RecordKind) MarshalText() ([]byte, error) { return enumMarshal(recordKindNames, k) }
func (k *RecordKind) UnmarshalText(b []byte) error {
	return enumUnmarshal(recordKindNames, "record kind", b, k)
}

// Role is which end of a flow a record comes from.
type Role uint8

// The roles.
const (
	Sender Role = iota + 1
	Receiver
)

var roleNames = []string{Sender: "sender", Receiver: "receiver"}

func (r Role) String() string                { return enumString(roleNames, r) }
func (r Role) MarshalText() ([]byte, error)  { return enumMarshal(roleNames, r) }
func (r *Role) UnmarshalText(b []byte) error { return enumUnmarshal(roleNames, "role", b, r) }

// Record is one sample or result, one JSON line in a results file. Only
// the fields of its Kind are set; the others are zero and left out of the
// JSON. Durations are integer nanoseconds (the _ns keys), rates bits per
// second (the _bps keys).
type Record struct {
	// Time is when the sample was really taken (the ticker's goroutine
	// reads the clock after reading the socket), not its nominal time.
	Time time.Time  `json:"time"`
	Flow string     `json:"flow"`
	Kind RecordKind `json:"kind"`
	Role Role       `json:"role"`

	// Subflow is the kernel's subflow id within its MPTCP connection (1
	// for the initial subflow, then counting up; 0 for plain TCP).
	Subflow uint8          `json:"subflow,omitempty"`
	Local   netip.AddrPort `json:"local,omitzero"`
	Remote  netip.AddrPort `json:"remote,omitzero"`

	// The sender's counters (subflow and connection records).
	BytesSent    uint64        `json:"bytes_sent,omitempty"`
	BytesAcked   uint64        `json:"bytes_acked,omitempty"`
	BytesRetrans uint64        `json:"bytes_retrans,omitempty"`
	Retransmits  uint32        `json:"retransmits,omitempty"` // segments retransmitted since the start
	RTOs         uint16        `json:"rtos,omitempty"`        // retransmission timeouts since the start
	RTT          time.Duration `json:"rtt_ns,omitempty"`      // smoothed
	RTTVar       time.Duration `json:"rttvar_ns,omitempty"`
	MinRTT       time.Duration `json:"min_rtt_ns,omitempty"`
	Cwnd         uint32        `json:"cwnd,omitempty"` // segments
	MSS          uint32        `json:"mss,omitempty"`
	DeliveryRate float64       `json:"delivery_rate_bps,omitempty"` // the kernel's latest estimate
	Subflows     uint8         `json:"subflows,omitempty"`          // connection: subflows open

	// The receiver's counters (receiver records, UDP too). Interval is
	// the time since the previous record of this flow and end, over which
	// Goodput is measured.
	BytesReceived uint64        `json:"bytes_received,omitempty"`
	Interval      time.Duration `json:"interval_ns,omitempty"`
	Goodput       float64       `json:"goodput_bps,omitempty"`
	Units         uint64        `json:"units,omitempty"`      // data units completed in the interval
	Jitter        time.Duration `json:"jitter_ns,omitempty"`  // see Jitter in the package doc
	MaxGap        time.Duration `json:"max_gap_ns,omitempty"` // longest gap between units
	Datagrams     uint64        `json:"datagrams,omitempty"`
	Lost          uint64        `json:"lost,omitempty"`

	// Results (see Result for their meaning).
	Protocol          Protocol      `json:"protocol,omitempty"`
	CongestionControl string        `json:"cc,omitempty"`
	FlowKind          Kind          `json:"flow_kind,omitempty"`
	Start             time.Time     `json:"start,omitzero"`
	Completion        time.Duration `json:"completion_ns,omitempty"`
	Error             string        `json:"error,omitempty"`
}

// Recorder takes the records of flows as they are made; it must be safe
// for concurrent use, since every flow samples on its own goroutine.
type Recorder interface {
	Record(Record)
}

// Writer is a Recorder that writes each record as a JSON line.
type Writer struct{ lines *jsonl.Writer }

// NewWriter returns a Writer on w; call Flush before closing w.
func NewWriter(w io.Writer) *Writer { return &Writer{jsonl.NewWriter(w)} }

// Record writes r; the first error is kept for Flush to return.
func (w *Writer) Record(r Record) {
	w.lines.Write(r, func() string { return fmt.Sprintf("record of flow %q", r.Flow) })
}

// Flush writes what is buffered and returns the first error of any
// Record or of the flush.
func (w *Writer) Flush() error {
	if err := w.lines.Flush(); err != nil {
		return fmt.Errorf("traffic: %w", err)
	}
	return nil
}

// Collector is a Recorder that keeps the records in memory.
type Collector struct {
	mu      sync.Mutex
	records []Record
}

// Record appends r.
func (c *Collector) Record(r Record) {
	c.mu.Lock()
	c.records = append(c.records, r)
	c.mu.Unlock()
}

// Reset forgets what was recorded.
func (c *Collector) Reset() {
	c.mu.Lock()
	c.records = nil
	c.mu.Unlock()
}

// Records returns a copy of what was recorded so far, in order.
func (c *Collector) Records() []Record {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Record(nil), c.records...)
}

// discard is the Recorder used when none is given.
type discard struct{}

func (discard) Record(Record) {}

func orDiscard(r Recorder) Recorder {
	if r == nil {
		return discard{}
	}
	return r
}

// LineError says which line of a results file could not be decoded.
type LineError struct {
	Line int
	Err  error
}

func (e *LineError) Error() string { return fmt.Sprintf("traffic: records line %d: %v", e.Line, e.Err) }
func (e *LineError) Unwrap() error { return e.Err }

// ReadRecords decodes a file of JSON lines written by a Writer. Unknown
// keys are errors, so that a file from another program is not misread.
func ReadRecords(r io.Reader) ([]Record, error) {
	var out []Record
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for line := 1; sc.Scan(); line++ {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var rec Record
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&rec); err != nil {
			return out, &LineError{Line: line, Err: err}
		}
		out = append(out, rec)
	}
	if err := sc.Err(); err != nil {
		return out, fmt.Errorf("traffic: read records: %w", err)
	}
	return out, nil
}
