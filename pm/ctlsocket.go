package pm

import (
	"context"
	"fmt"

	"github.com/amptcp/amptcp/internal/ctlsock"
)

// The control socket answers "status" (a Status) and "counters" (the
// Counters), as lispd's does (package internal/ctlsock).

const daemonName = "amptcp pm"

// serveControl answers the control socket until ctx is done.
func (d *Daemon) serveControl(ctx context.Context, path string) error {
	ln, err := ctlsock.Listen(path, daemonName)
	if err != nil {
		return err
	}
	go ctlsock.Serve(ctx, ln, d.log, func(command string) (any, error) {
		switch command {
		case "status":
			return d.Status(), nil
		case "counters":
			return d.Counters(), nil
		}
		return nil, fmt.Errorf("unknown command %q (status, counters)", command)
	})
	return nil
}

// QueryStatus asks the path manager at the control socket path for its
// status.
func QueryStatus(path string) (*Status, error) {
	var st Status
	if err := ctlsock.Query(path, daemonName, "status", &st); err != nil {
		return nil, err
	}
	return &st, nil
}
