package daemon

import (
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/amptcp/amptcp/config"
	"github.com/amptcp/amptcp/dataplane"
)

// ErrRestart is what Run returns after Restart: the data plane is
// pinned for the lispd that replaces this one, which the caller
// executes.
var ErrRestart = errors.New("lispd restarts")

// exit is how Run ends.
type exit int

const (
	exitSignal  exit = iota // its context is done: SIGTERM, SIGINT
	exitForGood             // Stop
	exitRestart             // Restart
)

// WithConfigFile names the configuration file the daemon was started
// with: Reload reads it again, Restart checks that it loads.
func WithConfigFile(path string) Option {
	return func(o *options) { o.cfgFile = path }
}

// WithLogLevel is the level of the daemon's logger, which Reload sets
// to a new log.level.
func WithLogLevel(level *slog.LevelVar) Option {
	return func(o *options) { o.level = level }
}

// Restart makes Run return ErrRestart, leaving the data plane of the
// tunnel roles forwarding, pinned, for the lispd that replaces this one.
// It refuses, changing nothing, when the configuration file does not
// load (the next lispd would not start) or the data plane cannot be
// kept (no BPF file system at its pin-path).
func (d *Daemon) Restart() error {
	var next *config.Config
	if f := d.opts.cfgFile; f != "" {
		var err error
		if next, err = config.Load(f); err != nil {
			return fmt.Errorf("restart refused: the configuration does not load: %w", err)
		}
	}
	if d.tun != nil {
		p := d.tun.dp.Pinning()
		if p.Path == "" {
			return fmt.Errorf("restart refused: the data plane cannot be kept: %s", p.Error)
		}
		if err := samePinPath(p.Path, next); err != nil {
			return fmt.Errorf("restart refused: %w; stop lispd for good (lispd stop) and start it instead", err)
		}
	}
	d.log.Info("restart asked for")
	d.requestExit(exitRestart)
	return nil
}

// Stop makes Run return, detaching the data plane and removing its pins
// even with keep-on-exit: lispd stops for good.
func (d *Daemon) Stop() {
	d.log.Info("stop for good asked for")
	d.requestExit(exitForGood)
}

// samePinPath says why the lispd of configuration next (nil: the same
// file as now) would not adopt the data plane pinned at path.
func samePinPath(path string, next *config.Config) error {
	if next == nil {
		return nil
	}
	if next.Dataplane == nil {
		return errors.New("the configuration has no xtr or rtr role any more, which would leave the data plane forwarding")
	}
	p, err := dataplane.PinPath(next.Dataplane.PinPath)
	if err != nil {
		return err
	}
	if p != path {
		return fmt.Errorf("dataplane.pin-path changes from %s to %q, where the new lispd would not find the data plane", path, p)
	}
	return nil
}

func (d *Daemon) requestExit(e exit) {
	select {
	case d.exit <- e:
	default: // one is on its way
	}
}

// RestartStatus is what `lispd restart` and `lispd stop` are told.
type RestartStatus struct {
	PID int `json:"pid"`
	// Pinning is where the data plane is kept across the restart.
	Pinning *dataplane.Pinning `json:"pinning,omitempty"`
}

func (d *Daemon) restartStatus() RestartStatus {
	st := RestartStatus{PID: os.Getpid()}
	if d.tun != nil {
		p := d.tun.dp.Pinning()
		st.Pinning = &p
	}
	return st
}

func (d *Daemon) config() *config.Config {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cfg
}
