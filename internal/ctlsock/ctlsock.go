// Package ctlsock is the local control socket of amptcp's daemons, which
// their status commands talk to: a unix socket only its owner may use,
// one JSON request and one JSON response per connection.
//
// A request is {"command": "status"}; the response holds the answer
// under the command's name, {"status": {...}}, or {"error": "..."}.
package ctlsock

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"
)

type request struct {
	Command string `json:"command"`
}

// Listen opens the control socket at path, for its owner only. A socket
// file left by a daemon that is gone is replaced; one that still answers
// is an error naming who (the daemon) runs there.
func Listen(path, who string) (net.Listener, error) {
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return nil, fmt.Errorf("control socket %s: another %s is running", path, who)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	ln, err := net.Listen("unix", path)
	if err == nil {
		if err = os.Chmod(path, 0o600); err != nil {
			ln.Close()
		}
	}
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	return ln, nil
}

// Serve answers the connections to ln until ctx is done, then closes it
// (which removes the file) and returns once the answers under way are
// sent: the answer to a command that stops the daemon too. answer gets
// each request's command and returns the value to send under its name,
// or an error to send instead.
func Serve(ctx context.Context, ln net.Listener, log *slog.Logger, answer func(command string) (any, error)) {
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() == nil {
				log.Error("control socket", "error", err)
			}
			return
		}
		wg.Go(func() { respond(c, answer) })
	}
}

func respond(c net.Conn, answer func(string) (any, error)) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReader(c).ReadBytes('\n')
	if err != nil && len(line) == 0 {
		return
	}
	var req request
	resp := map[string]any{}
	if json.Unmarshal(line, &req) != nil {
		resp["error"] = `request is not JSON like {"command": "status"}`
	} else if v, err := answer(req.Command); err != nil {
		resp["error"] = err.Error()
	} else {
		resp[req.Command] = v
	}
	json.NewEncoder(c).Encode(resp)
}

// ErrNotRunning is in Query's error when no daemon listens at the path.
var ErrNotRunning = errors.New("no daemon listens")

// dialError is a failed connection, which means ErrNotRunning too.
type dialError struct{ err error }

func (e dialError) Error() string   { return e.err.Error() }
func (e dialError) Unwrap() []error { return []error{e.err, ErrNotRunning} }

// Query sends command to the control socket at path and decodes the
// answer into v; who names the daemon in errors.
func Query(path, who, command string, v any) error {
	c, err := net.DialTimeout("unix", path, 5*time.Second)
	if err != nil {
		return fmt.Errorf("control socket %s: %w (is %s running?)", path, dialError{err}, who)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	if err := json.NewEncoder(c).Encode(request{Command: command}); err != nil {
		return err
	}
	var resp map[string]json.RawMessage
	if err := json.NewDecoder(c).Decode(&resp); err != nil {
		return fmt.Errorf("control socket %s: %w", path, err)
	}
	if msg, ok := resp["error"]; ok {
		var s string
		json.Unmarshal(msg, &s)
		return errors.New(s)
	}
	raw, ok := resp[command]
	if !ok {
		return fmt.Errorf("control socket %s: no %s in the answer", path, command)
	}
	return json.Unmarshal(raw, v)
}
