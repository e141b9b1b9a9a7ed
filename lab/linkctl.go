package lab

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/amptcp/amptcp/lab/linkemu"
	"github.com/amptcp/amptcp/lab/topo"
)

// LinkControl changes the emulated links of a running lab through its link daemon.
type LinkControl interface {
	// Apply carries out one timeline event (down, up or set; one direction or both).
	Apply(ev topo.Event) error
	// Stats are the emulated links' counters and lateness, by link name.
	Stats() (map[string]linkemu.Stats, error)
}

// ErrNoEmulatedLinks is returned by OpenLinks for a lab whose links are
// all veth pairs: it has no link daemon to talk to.
var ErrNoEmulatedLinks = errors.New("no emulated link")

// OpenLinks returns the LinkControl of the running lab name (an error if it has no
// emulated link).
func OpenLinks(name string, opts Options) (LinkControl, error) {
	st, err := Load(name, opts)
	if err != nil {
		return nil, err
	}
	p, ok := st.linkd()
	if !ok {
		return nil, fmt.Errorf("lab %s: %w (links with a rate, delay, loss or queue are emulated)", name, ErrNoEmulatedLinks)
	}
	return &linkClient{socket: p.Socket}, nil
}

// linkd returns the link daemon's process, if the lab has one.
func (s *State) linkd() (Process, bool) {
	for _, p := range s.Processes {
		if p.Daemon == linkdDaemon {
			return p, true
		}
	}
	return Process{}, false
}

// The link daemon's control protocol: one JSON request and one JSON
// answer per connection, as internal/ctlsock's, with an argument (the
// event) that ctlsock's requests do not carry.
type linkRequest struct {
	Command string      `json:"command"` // apply or stats
	Event   *topo.Event `json:"event,omitempty"`
}

type linkAnswer struct {
	Error string                   `json:"error,omitempty"`
	Stats map[string]linkemu.Stats `json:"stats,omitempty"`
}

const (
	cmdApply = "apply"
	cmdStats = "stats"
)

// linkClient talks to a link daemon's control socket.
type linkClient struct{ socket string }

func (c *linkClient) Apply(ev topo.Event) error {
	_, err := c.query(linkRequest{Command: cmdApply, Event: &ev})
	return err
}

func (c *linkClient) Stats() (map[string]linkemu.Stats, error) {
	a, err := c.query(linkRequest{Command: cmdStats})
	if err != nil {
		return nil, err
	}
	return a.Stats, nil
}

func (c *linkClient) query(req linkRequest) (*linkAnswer, error) {
	conn, err := net.DialTimeout("unix", c.socket, 5*time.Second)
	if err != nil {
		return nil, fmt.Errorf("link daemon %s: %w (is it running?)", c.socket, err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if err := json.NewEncoder(conn).Encode(req); err != nil {
		return nil, fmt.Errorf("link daemon %s: %w", c.socket, err)
	}
	var a linkAnswer
	if err := json.NewDecoder(conn).Decode(&a); err != nil {
		return nil, fmt.Errorf("link daemon %s: %w", c.socket, err)
	}
	if a.Error != "" {
		return nil, errors.New(a.Error)
	}
	return &a, nil
}

// answerLinks serves one connection of the link daemon's control socket.
func answerLinks(conn net.Conn, apply func(topo.Event) error, stats func() (map[string]linkemu.Stats, error)) {
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReader(conn).ReadBytes('\n')
	if err != nil && len(line) == 0 {
		return
	}
	var req linkRequest
	var a linkAnswer
	switch err := json.Unmarshal(line, &req); {
	case err != nil:
		a.Error = `request is not JSON like {"command": "stats"}`
	case req.Command == cmdStats:
		a.Stats, err = stats()
		if err != nil {
			a.Error = err.Error()
		}
	case req.Command == cmdApply && req.Event != nil:
		if err := apply(*req.Event); err != nil {
			a.Error = err.Error()
		}
	case req.Command == cmdApply:
		a.Error = "apply: no event"
	default:
		a.Error = fmt.Sprintf("unknown command %q (apply, stats)", req.Command)
	}
	json.NewEncoder(conn).Encode(a)
}

// directions are the directions an event applies to: both when it names
// none.
func directions(s string) ([]linkemu.Direction, error) {
	switch s {
	case "":
		return []linkemu.Direction{linkemu.AToB, linkemu.BToA}, nil
	case linkemu.AToB.String():
		return []linkemu.Direction{linkemu.AToB}, nil
	case linkemu.BToA.String():
		return []linkemu.Direction{linkemu.BToA}, nil
	}
	return nil, fmt.Errorf("direction: %q is not a-to-b or b-to-a", s)
}

// setParams applies what a set event changes to one direction's
// parameters, on a link of the given MTU, and checks the result.
func setParams(p *linkemu.Params, ev topo.Event, mtu int) error {
	if ev.Rate == "" && ev.Delay == "" && ev.Loss == nil && ev.Queue == "" {
		return errors.New("set changes at least one of rate, delay, loss, queue")
	}
	var errs []error
	if ev.Rate != "" {
		r, err := topo.ParseRate(ev.Rate)
		errs = append(errs, prefixed("rate", err))
		p.Rate = r
	}
	if ev.Delay != "" {
		d, err := time.ParseDuration(strings.TrimSpace(ev.Delay))
		if err == nil && d < 0 {
			err = fmt.Errorf("%v is negative", d)
		}
		errs = append(errs, prefixed("delay", err))
		p.Delay = d
	}
	if ev.Queue != "" {
		q, err := topo.ParseQueue(ev.Queue, mtu)
		errs = append(errs, prefixed("queue", err))
		p.QueueBytes = q
	}
	if ev.Loss != nil {
		l, err := ev.Loss.Model()
		errs = append(errs, prefixed("loss", err))
		p.Loss = l
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return p.Validate(mtu)
}

func prefixed(field string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", field, err)
}

// LinkEvent builds the event of `amptcp lab link` (topo.NewEvent).
func LinkEvent(link, action, direction, rate, delay, loss, queue string) (topo.Event, error) {
	return topo.NewEvent(link, action, direction, rate, delay, loss, queue)
}
