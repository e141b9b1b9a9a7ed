package cc

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/cilium/ebpf"
)

// Status is what the kernel holds of amptcp's congestion controls,
// whoever loaded them.
type Status struct {
	Controls   []Control  `json:"controls"`
	Schedulers Schedulers `json:"schedulers"`
}

// Control is one congestion control.
type Control struct {
	Name string `json:"name"`
	// Registered says that sockets can select it: the kernel lists it in
	// net.ipv4.tcp_available_congestion_control.
	Registered bool `json:"registered"`
	// Installed says that `amptcp cc load` pinned its registration, which
	// then lasts until `amptcp cc unload`.
	Installed bool `json:"installed"`
	// Loaded counts the versions of its programs that the kernel keeps:
	// the registered one, and those that were replaced or unregistered
	// while sockets still used them.
	Loaded      int          `json:"loaded"`
	Counters    Counters     `json:"counters"`
	Connections []Connection `json:"connections,omitempty"`
}

// Connection is one MPTCP connection coupled by a congestion control, as
// its entry in the control's map shows it.
type Connection struct {
	Token uint32 `json:"token"`
	// Alpha is LIA's alpha (RFC 6356): how aggressive the connection is
	// as a whole, 1 being one TCP on its best path.
	Alpha    float64   `json:"alpha,omitempty"`
	Subflows []Subflow `json:"subflows"`
}

// Subflow is one subflow of a coupled connection.
type Subflow struct {
	// ID is the kernel's subflow id, as MPTCP_FULL_INFO numbers them.
	ID   uint32        `json:"id"`
	Cwnd uint32        `json:"cwnd"`
	RTT  time.Duration `json:"rtt"`
	// Alpha is the coupling term applied to this subflow: OLIA's
	// alpha_r, BALIA's max-rate ratio alpha_r, wVegas's queue target in
	// packets; 0 for LIA (see Connection.Alpha).
	Alpha float64 `json:"alpha"`
}

// ReadStatus finds amptcp's congestion controls in the kernel by the
// names of their maps, so that it sees those that any process loaded.
// It needs CAP_SYS_ADMIN to open maps by ID.
func ReadStatus() (*Status, error) {
	available, err := Available()
	if err != nil {
		return nil, err
	}
	byName := map[string]*Control{}
	for _, n := range Names {
		byName[n] = &Control{Name: n, Registered: slices.Contains(available, n), Installed: installed(n)}
	}
	var errs []error
	err = eachMap(func(m *ebpf.Map, info *ebpf.MapInfo) {
		name, kind, ok := strings.Cut(info.Name, "_")
		c := byName["amp_"+name]
		if !ok || c == nil {
			if info.Type == ebpf.StructOpsMap && byName[info.Name] != nil {
				byName[info.Name].Loaded++
			}
			return
		}
		switch kind {
		case "conns":
			conns, err := readConns(m)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", info.Name, err))
			}
			c.Connections = append(c.Connections, conns...)
		case "counters":
			n, err := readCounters(m)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", info.Name, err))
			}
			c.Counters.add(n)
		}
	})
	if err != nil {
		return nil, err
	}
	st := &Status{}
	if sch, err := ReadSchedulers(); err == nil {
		st.Schedulers = sch
	} else {
		errs = append(errs, err)
	}
	for _, n := range Names {
		c := byName[n]
		slices.SortFunc(c.Connections, func(a, b Connection) int { return int(int64(a.Token) - int64(b.Token)) })
		st.Controls = append(st.Controls, *c)
	}
	return st, errors.Join(errs...)
}

func (c *Counters) add(o Counters) {
	c.Acks += o.Acks
	c.CoupledAcks += o.CoupledAcks
	c.Losses += o.Losses
	c.ConnsCreated += o.ConnsCreated
	c.ConnsDeleted += o.ConnsDeleted
	c.MapFull += o.MapFull
	c.SlotsFull += o.SlotsFull
	c.Subflows += o.Subflows
	c.Plain += o.Plain
	c.Early += o.Early
	c.Swept += o.Swept
	c.Insane += o.Insane
}

// eachMap calls fn with every BPF map of the host and its info.
func eachMap(fn func(*ebpf.Map, *ebpf.MapInfo)) error {
	var id ebpf.MapID
	for {
		next, err := ebpf.MapGetNextID(id)
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("cc: list BPF maps: %w", err)
		}
		id = next
		m, err := ebpf.NewMapFromID(id)
		if errors.Is(err, os.ErrNotExist) {
			continue // freed meanwhile
		}
		if err != nil {
			return fmt.Errorf("cc: open BPF map %d: %w", id, err)
		}
		if info, err := m.Info(); err == nil {
			fn(m, info)
		}
		m.Close()
	}
}

// readConns reads a control's connections map.
func readConns(m *ebpf.Map) ([]Connection, error) {
	var (
		out   []Connection
		token uint32
		v     ccAmpConn
	)
	it := m.Iterate()
	for it.Next(&token, &v) {
		c := Connection{Token: token}
		if v.Algo == algoLIA {
			c.Alpha = fixed(int64(v.Alpha))
		}
		for _, s := range v.Slots {
			if s.Id == 0 {
				continue
			}
			c.Subflows = append(c.Subflows, Subflow{ID: s.Id, Cwnd: s.Cwnd,
				RTT: time.Duration(s.RttUs) * time.Microsecond, Alpha: fixed(int64(s.Alpha))})
		}
		slices.SortFunc(c.Subflows, func(a, b Subflow) int { return int(int64(a.ID) - int64(b.ID)) })
		out = append(out, c)
	}
	if err := it.Err(); err != nil {
		return out, fmt.Errorf("read connections: %w", err)
	}
	return out, nil
}

// enum amp_algo.
const algoLIA = 1

// fixed converts a 2^-16 fixed-point value.
func fixed(v int64) float64 { return float64(v) / (1 << 16) }

// Available lists the congestion controls that sockets can select now.
func Available() ([]string, error) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/tcp_available_congestion_control")
	if err != nil {
		return nil, fmt.Errorf("cc: %w", err)
	}
	return strings.Fields(string(b)), nil
}
