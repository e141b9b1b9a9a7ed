package live

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/amptcp/amptcp/lab/claims"
	"github.com/amptcp/amptcp/lab/results"
)

// page is the live view's page: self-contained (no external script or
// style: the lab's machines may have no internet), it draws the charts
// from /events with a canvas.
//
//go:embed page.html
var page []byte

// clientBuffer is how many updates may wait for an /events client; one
// that falls further behind is cut off rather than waited for.
const clientBuffer = 256

// writeTimeout bounds each write to an /events client, so that a client
// that stopped reading does not hold its handler forever.
const writeTimeout = 10 * time.Second

// UpdateType says what an Update carries.
type UpdateType string

// The updates of /events.
const (
	// UpdateSnapshot: State, everything; a client's first message.
	UpdateSnapshot UpdateType = "snapshot"
	// UpdateRun: a run started; Run (without samples yet) and Progress.
	UpdateRun UpdateType = "run"
	// UpdateFlows: the run's flows started at FlowsStart.
	UpdateFlows UpdateType = "flows"
	// UpdatePoint: a new point, Series with only that point in Points.
	UpdatePoint UpdateType = "point"
	// UpdateEvent: a timeline event was applied, Event.
	UpdateEvent UpdateType = "event"
	// UpdateCompletion: a flow's Completion, new or with its other end.
	UpdateCompletion UpdateType = "completion"
	// UpdateEnd: the run ended; its Summary, all its Events, Progress.
	UpdateEnd UpdateType = "end"
	// UpdateTopology: a run's Topology, as it starts.
	UpdateTopology UpdateType = "topology"
	// UpdateLoads: every link's load, Loads, in the topology's order.
	UpdateLoads UpdateType = "loads"
	// UpdateLink: a link's new state, Link (down, up, changed).
	UpdateLink UpdateType = "link"
	// UpdateClaims: the claims as they stand, Claims.
	UpdateClaims UpdateType = "claims"
	// UpdateControl: whether the links can be changed now, Control.
	UpdateControl UpdateType = "control"
)

// Update is one message of /events: a JSON object in the data line of a
// Server-Sent Event. Type says which of the other fields are set.
type Update struct {
	Type       UpdateType      `json:"type"`
	State      *State          `json:"state,omitempty"`
	Run        *Run            `json:"run,omitempty"`
	Progress   *Progress       `json:"progress,omitempty"`
	FlowsStart time.Time       `json:"flows_start,omitzero"`
	Series     *Series         `json:"series,omitempty"`
	Event      *results.Event  `json:"event,omitempty"`
	Completion *Completion     `json:"completion,omitempty"`
	Summary    *Summary        `json:"summary,omitempty"`
	Events     []results.Event `json:"events,omitempty"`
	Topology   *Topology       `json:"topology,omitempty"`
	Loads      [][2]float64    `json:"loads,omitempty"`
	Link       *Link           `json:"link,omitempty"`
	Claims     []claims.Result `json:"claims,omitempty"`
	Control    *bool           `json:"control,omitempty"`
}

// client is an /events client: updates queue for it until it lags, which
// closes lagged.
type client struct {
	updates chan []byte
	lagged  chan struct{}
}

// broadcast queues u for every client, cutting off those whose queue is
// full. s.mu is held.
func (s *Server) broadcast(u Update) {
	if len(s.clients) == 0 {
		return
	}
	b, err := json.Marshal(u)
	for c := range s.clients {
		if err == nil {
			select {
			case c.updates <- b:
				continue
			default:
			}
		}
		// A client without this update would show a wrong state: cut
		// off, it reconnects and starts again from a snapshot.
		delete(s.clients, c)
		close(c.lagged)
		s.disconnected++
	}
}

// ServeHTTP serves the live view: / the page, /state the State as JSON,
// /events the snapshot and then the updates as Server-Sent Events.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mux.ServeHTTP(w, r)
}

func (s *Server) routes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.Write(bytes.Replace(page, []byte("CONTROL-TOKEN"), []byte(s.token), 1))
	})
	mux.HandleFunc("GET /state", func(w http.ResponseWriter, r *http.Request) {
		b, err := json.Marshal(s.State())
		if err != nil {
			http.Error(w, "encode the state: "+err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.Write(append(b, '\n'))
	})
	mux.HandleFunc("GET /events", s.serveEvents)
	mux.HandleFunc("POST /control", s.serveControl)
	return mux
}

func (s *Server) serveEvents(w http.ResponseWriter, r *http.Request) {
	c, st := s.subscribe()
	defer s.unsubscribe(c)
	snapshot, err := json.Marshal(Update{Type: UpdateSnapshot, State: &st})
	if err != nil {
		http.Error(w, "encode the state: "+err.Error(), http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	write := func(chunks ...[]byte) error {
		rc.SetWriteDeadline(time.Now().Add(writeTimeout))
		for _, b := range chunks {
			if _, err := w.Write(b); err != nil {
				return err
			}
		}
		return rc.Flush()
	}
	send := func(b []byte) error { return write([]byte("data: "), b, []byte("\n\n")) }
	// How soon a browser reconnects after a cut, in ms.
	if err := write([]byte("retry: 1000\n\n")); err != nil {
		return
	}
	if err := send(snapshot); err != nil {
		return
	}
	for {
		select {
		case b := <-c.updates:
			if err := send(b); err != nil {
				return
			}
		case <-c.lagged:
			return
		case <-r.Context().Done():
			return
		case <-s.closed:
			return
		}
	}
}

// subscribe registers a client and returns the state it starts from:
// every update after it goes to the client's queue.
func (s *Server) subscribe() (*client, State) {
	c := &client{updates: make(chan []byte, clientBuffer), lagged: make(chan struct{})}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clients[c] = struct{}{}
	return c, s.stateLocked()
}

func (s *Server) unsubscribe(c *client) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.clients, c)
}

// Listen listens on addr (host:port) and serves the live view in the
// background until Close; it returns the page's URL: on the address it
// listens on (its port when addr's is 0), localhost when that is any
// address.
func (s *Server) Listen(addr string) (url string, err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", err
	}
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	s.mu.Lock()
	if s.srv != nil {
		s.mu.Unlock()
		ln.Close()
		return "", errors.New("already listening")
	}
	s.srv = srv
	s.mu.Unlock()
	go srv.Serve(ln)
	host := ln.Addr().String()
	if a, ok := ln.Addr().(*net.TCPAddr); ok && a.IP.IsUnspecified() {
		host = net.JoinHostPort("localhost", strconv.Itoa(a.Port))
	}
	return "http://" + host + "/", nil
}

// Close ends the /events streams and stops serving.
func (s *Server) Close() error {
	s.closeOnce.Do(func() { close(s.closed) })
	s.mu.Lock()
	srv := s.srv
	s.mu.Unlock()
	if srv == nil {
		return nil
	}
	return srv.Close()
}
