package daemon

import (
	"context"
	"fmt"
	"runtime"

	"github.com/amptcp/amptcp/internal/ctlsock"
)

// The control socket (internal/ctlsock) answers {"command": "status"}
// with {"status": {...}}, "counters" with the counters, "memory" by
// collecting garbage and reporting the heap; "reload" reloads the
// configuration, "restart" restarts lispd keeping the data plane, "stop"
// stops it for good; "profile-start" and "profile-stop" profile it
// (WithProfiles).

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

// serveControl answers the control socket until ctx is done.
func (d *Daemon) serveControl(ctx context.Context) {
	ctlsock.Serve(ctx, d.ctl, d.log, func(command string) (any, error) {
		switch command {
		case "status":
			return d.Status(), nil
		case "counters":
			return d.Counters(), nil
		case "memory":
			return d.memory(), nil
		case "reload":
			return d.Reload(), nil
		case "restart":
			if err := d.Restart(); err != nil {
				return nil, err
			}
			return d.restartStatus(), nil
		case "stop":
			d.Stop()
			return d.restartStatus(), nil
		case "profile-start":
			return d.prof.start()
		case "profile-stop":
			return d.prof.stop()
		}
		return nil, fmt.Errorf("unknown command %q (status, counters, memory, reload, restart, stop, profile-start, profile-stop)", command)
	})
}

// QueryStatus asks the lispd at the control socket path for its status.
func QueryStatus(path string) (*Status, error) {
	var st Status
	if err := ctlsock.Query(path, "lispd", "status", &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// QueryCounters asks the lispd at the control socket path for its
// counters.
func QueryCounters(path string) (*Counters, error) {
	var cs Counters
	if err := ctlsock.Query(path, "lispd", "counters", &cs); err != nil {
		return nil, err
	}
	return &cs, nil
}

// ErrNotRunning is in the errors of the queries when no lispd answers
// at the control socket.
var ErrNotRunning = ctlsock.ErrNotRunning

// Ask sends a command that changes the running lispd at the control
// socket path ("reload", "restart", "stop") and decodes its answer into
// v.
func Ask(path, command string, v any) error {
	return ctlsock.Query(path, "lispd", command, v)
}

// QueryMemory asks the lispd at the control socket path to collect
// garbage and report its memory.
func QueryMemory(path string) (*Memory, error) {
	var m Memory
	if err := ctlsock.Query(path, "lispd", "memory", &m); err != nil {
		return nil, err
	}
	return &m, nil
}
