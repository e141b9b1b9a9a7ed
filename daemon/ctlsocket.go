package daemon

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"time"
)

// The control socket speaks one JSON request and one JSON response per
// connection: {"command": "status"} gets {"status": {...}}, {"command":
// "counters"} gets {"counters": {...}}, {"command": "memory"} collects
// garbage and gets {"memory": {...}}, anything else {"error": "..."}.

type ctlRequest struct {
	Command string `json:"command"`
}

type ctlResponse struct {
	Status   *Status   `json:"status,omitempty"`
	Counters *Counters `json:"counters,omitempty"`
	Memory   *Memory   `json:"memory,omitempty"`
	Error    string    `json:"error,omitempty"`
}

// Memory is the daemon's memory after a garbage collection: what its
// registrations really take, for `amptcp bench`.
type Memory struct {
	HeapAlloc     uint64 `json:"heap_alloc"` // live heap
	Sys           uint64 `json:"sys"`        // obtained from the OS
	Registrations int    `json:"registrations"`
}

// memory collects garbage and reports the heap.
func (d *Daemon) memory() Memory {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	mem := Memory{HeapAlloc: m.HeapAlloc, Sys: m.Sys}
	if d.ms != nil {
		mem.Registrations = d.ms.Counters().Registrations
	}
	return mem
}

// listenControl opens the control socket at path. Only its owner (root)
// may use it: status shows who registered what.
func listenControl(path string) (net.Listener, error) {
	if err := removeStaleSocket(path); err != nil {
		return nil, err
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("control socket: %w", err)
	}
	return ln, nil
}

// serveControl answers the control socket until ctx is done. Closing the
// listener removes the socket file.
func (d *Daemon) serveControl(ctx context.Context, ln net.Listener) {
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() == nil {
				d.log.Error("control socket", "error", err)
			}
			return
		}
		go d.answerControl(c)
	}
}

func (d *Daemon) answerControl(c net.Conn) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	var req ctlRequest
	var resp ctlResponse
	line, err := bufio.NewReader(c).ReadBytes('\n')
	switch {
	case err != nil && len(line) == 0:
		return
	case json.Unmarshal(line, &req) != nil:
		resp.Error = "request is not JSON like {\"command\": \"status\"}"
	case req.Command == "status":
		st := d.Status()
		resp.Status = &st
	case req.Command == "counters":
		cs := d.Counters()
		resp.Counters = &cs
	case req.Command == "memory":
		m := d.memory()
		resp.Memory = &m
	default:
		resp.Error = fmt.Sprintf("unknown command %q (status, counters, memory)", req.Command)
	}
	json.NewEncoder(c).Encode(resp)
}

// removeStaleSocket removes a socket file left by a lispd that is gone,
// and refuses to take over one that still answers.
func removeStaleSocket(path string) error {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return fmt.Errorf("control socket %s: another lispd is running", path)
	}
	return os.Remove(path)
}

// QueryStatus asks the lispd at the control socket path for its status.
func QueryStatus(path string) (*Status, error) {
	resp, err := query(path, "status")
	if err != nil {
		return nil, err
	}
	return resp.Status, nil
}

// QueryCounters asks the lispd at the control socket path for its
// counters.
func QueryCounters(path string) (*Counters, error) {
	resp, err := query(path, "counters")
	if err != nil {
		return nil, err
	}
	return resp.Counters, nil
}

// QueryMemory asks the lispd at the control socket path to collect
// garbage and report its memory.
func QueryMemory(path string) (*Memory, error) {
	resp, err := query(path, "memory")
	if err != nil {
		return nil, err
	}
	return resp.Memory, nil
}

func query(path, command string) (*ctlResponse, error) {
	c, err := net.DialTimeout("unix", path, 5*time.Second)
	if err != nil {
		return nil, fmt.Errorf("control socket %s: %w (is lispd running?)", path, err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	if err := json.NewEncoder(c).Encode(ctlRequest{Command: command}); err != nil {
		return nil, err
	}
	var resp ctlResponse
	if err := json.NewDecoder(c).Decode(&resp); err != nil {
		return nil, fmt.Errorf("control socket %s: %w", path, err)
	}
	if resp.Error != "" {
		return nil, errors.New(resp.Error)
	}
	return &resp, nil
}
