package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/amptcp/amptcp/config"
	"github.com/amptcp/amptcp/daemon"
	"github.com/amptcp/amptcp/dataplane"
)

// runReload asks the running lispd to reload its configuration file and
// says what it applied and what waits for a restart.
func runReload(args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("lispd reload", flag.ContinueOnError)
	flags.SetOutput(stderr)
	socket := flags.String("socket", config.DefaultControlSocket, "lispd's control socket")
	if err := flags.Parse(args); err != nil {
		return 2
	}
	var r daemon.Reload
	if err := daemon.Ask(*socket, "reload", &r); err != nil {
		fmt.Fprintf(stderr, "lispd reload: %v\n", err)
		return 1
	}
	if r.Error != "" {
		fmt.Fprintf(stderr, "lispd reload: nothing changed: %s\n", r.Error)
		return 1
	}
	fmt.Fprintf(stdout, "lispd reloaded: %s\n", reloadSummary(&r))
	return 0
}

// runRestart asks the running lispd to restart, keeping its data plane,
// and waits for the new lispd to answer.
func runRestart(args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("lispd restart", flag.ContinueOnError)
	flags.SetOutput(stderr)
	socket := flags.String("socket", config.DefaultControlSocket, "lispd's control socket")
	timeout := flags.Duration("timeout", time.Minute, "how long to wait for the new lispd")
	if err := flags.Parse(args); err != nil {
		return 2
	}
	before, err := daemon.QueryStatus(*socket)
	if err != nil {
		fmt.Fprintf(stderr, "lispd restart: %v\n", err)
		return 1
	}
	var rs daemon.RestartStatus
	if err := daemon.Ask(*socket, "restart", &rs); err != nil {
		fmt.Fprintf(stderr, "lispd restart: %v\n", err)
		return 1
	}
	start := time.Now()
	for {
		st, err := daemon.QueryStatus(*socket)
		if err == nil && !st.Started.Equal(before.Started) {
			fmt.Fprintf(stdout, "lispd restarted (pid %d) in %s: %s\n", rs.PID, time.Since(start).Round(time.Millisecond), adopted(st))
			return 0
		}
		if time.Since(start) > *timeout {
			fmt.Fprintf(stderr, "lispd restart: no new lispd answered at %s within %s (its log says why); the data plane stays pinned for it\n",
				*socket, *timeout)
			return 1
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// adopted says what the new lispd took over.
func adopted(st *daemon.Status) string {
	dp := st.Dataplane
	switch {
	case dp == nil:
		return "no data plane (no xtr or rtr role)"
	case dp.Adoption == nil:
		return "it adopted no data plane"
	}
	a := dp.Adoption
	s := fmt.Sprintf("it adopted the data plane (%d map-cache entries, programs replaced on %d interfaces)", a.Entries, a.Links)
	if len(a.Refused) > 0 {
		var names []string
		for name := range a.Refused {
			names = append(names, name)
		}
		s += "; started empty: " + strings.Join(names, ", ") + " (lispd status says why)"
	}
	return s
}

// runStop stops lispd for good: the running one is asked to detach its
// data plane and exit; when none answers, what one left pinned for a
// restart is removed.
func runStop(args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("lispd stop", flag.ContinueOnError)
	flags.SetOutput(stderr)
	cfgPath := flags.String("config", DefaultConfig, "the configuration file lispd runs with (its control socket and pin-path)")
	timeout := flags.Duration("timeout", time.Minute, "how long to wait for lispd to exit")
	if err := flags.Parse(args); err != nil {
		return 2
	}
	cfg, err := config.Load(*cfgPath)
	if err != nil {
		fmt.Fprintf(stderr, "lispd stop: %v\n", err)
		return 1
	}
	sock := cfg.Control.Socket
	var rs daemon.RestartStatus
	if err := daemon.Ask(sock, "stop", &rs); err == nil {
		for start := time.Now(); ; time.Sleep(50 * time.Millisecond) {
			if _, err := daemon.QueryStatus(sock); err != nil {
				fmt.Fprintf(stdout, "lispd (pid %d) stopped for good\n", rs.PID)
				return 0
			}
			if time.Since(start) > *timeout {
				fmt.Fprintf(stderr, "lispd stop: lispd (pid %d) still answers after %s\n", rs.PID, *timeout)
				return 1
			}
		}
	} else if !errors.Is(err, daemon.ErrNotRunning) {
		fmt.Fprintf(stderr, "lispd stop: %v\n", err)
		return 1
	}
	if cfg.Dataplane == nil {
		fmt.Fprintf(stdout, "no lispd answers at %s\n", sock)
		return 0
	}
	dir, err := dataplane.PinPath(cfg.Dataplane.PinPath)
	if err == nil && dir == "" {
		fmt.Fprintf(stdout, "no lispd answers at %s, and its data plane is never pinned\n", sock)
		return 0
	}
	found := false
	if err == nil {
		found, err = dataplane.RemovePinned(dir)
	}
	switch {
	case err != nil:
		fmt.Fprintf(stderr, "lispd stop: no lispd answers at %s; its pinned data plane: %v\n", sock, err)
		return 1
	case found:
		fmt.Fprintf(stdout, "no lispd answers at %s; removed the data plane it left at %s\n", sock, dir)
	default:
		fmt.Fprintf(stdout, "no lispd answers at %s, and nothing is pinned at %s\n", sock, dir)
	}
	return 0
}
