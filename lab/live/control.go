package live

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"

	"github.com/amptcp/amptcp/lab/topo"
)

// TokenHeader carries the control token, which the page has: a control
// request without it is refused, so that a page of another origin that
// the browser also shows cannot change the experiment (it cannot read
// the token, nor send this header without the server's consent).
const TokenHeader = "X-Amptcp-Token"

// maxControlBody bounds a control request.
const maxControlBody = 4 << 10

func newToken() string {
	b := make([]byte, 16)
	rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// ControlRequest is the body of POST /control: take a link down or up,
// or set its delay or loss (one direction or both), in the run under
// way.
type ControlRequest struct {
	Link      string `json:"link"`
	Action    string `json:"action"`              // down, up or set
	Direction string `json:"direction,omitempty"` // a-to-b, b-to-a, or both
	Delay     string `json:"delay,omitempty"`     // "30ms"
	Loss      string `json:"loss,omitempty"`      // "0.01" or "1%"
}

// ControlAnswer is its answer.
type ControlAnswer struct {
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
}

// serveControl applies a control request to the run under way through
// the runner (which records it as a manual event of the run). Refused:
// without the token (403), not JSON (415), a link the run does not have
// or does not emulate, or a bad value (422), no run's flows under way
// (409).
func (s *Server) serveControl(w http.ResponseWriter, r *http.Request) {
	answer := func(code int, a ControlAnswer) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(code)
		json.NewEncoder(w).Encode(a)
	}
	if subtle.ConstantTimeCompare([]byte(r.Header.Get(TokenHeader)), []byte(s.token)) != 1 {
		answer(http.StatusForbidden, ControlAnswer{Error: "no or wrong " + TokenHeader + ": control requests come from the live view's page"})
		return
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		answer(http.StatusUnsupportedMediaType, ControlAnswer{Error: "the request is JSON (Content-Type: application/json)"})
		return
	}
	var req ControlRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, maxControlBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		answer(http.StatusUnprocessableEntity, ControlAnswer{Error: "request: " + err.Error()})
		return
	}
	ev, err := topo.NewEvent(req.Link, req.Action, req.Direction, "", req.Delay, req.Loss, "")
	s.mu.Lock()
	apply, top := s.control, s.topology
	if err == nil && top != nil {
		if l := top.link(req.Link); l == nil || !l.Emulated {
			err = fmt.Errorf("link %q is not an emulated link of the run's topology", req.Link)
		}
	}
	s.mu.Unlock()
	switch {
	case err != nil:
		answer(http.StatusUnprocessableEntity, ControlAnswer{Error: err.Error()})
		return
	case apply == nil:
		answer(http.StatusConflict, ControlAnswer{Error: "no run's flows are running: the controls work while they do"})
		return
	}
	// Without the lock: the runner tells the view of the event (which
	// takes it) before apply returns.
	if err := apply(ev); err != nil {
		answer(http.StatusUnprocessableEntity, ControlAnswer{Error: err.Error()})
		return
	}
	s.mu.Lock()
	s.linkChanged(ev)
	s.mu.Unlock()
	answer(http.StatusOK, ControlAnswer{OK: true})
}
