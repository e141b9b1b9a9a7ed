// Package lab builds a lab from its topology (package lab/topo) and takes
// it down: namespaces, links, addresses, routes, the generated
// configurations and the daemons in their roles (lispd, `amptcp pm`).
//
// Everything Up creates is noted in the lab's state file before it is
// created, so that Down removes all of it, by name and by PID, after a
// clean run as after a crash: daemons by PID (checked against their start
// time), other processes by the namespace they are in, links and
// namespaces by name, and any namespace that carries the lab's prefix.
// Nothing outside the lab's namespaces and directory is touched.
// docs/lab.md describes the lifecycle.
package lab

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// DefaultDir holds a directory per lab.
const DefaultDir = "/run/amptcp-lab"

// stateFile is the name of the state file in a lab's directory.
const stateFile = "state.json"

// Options are where a lab lives and how it talks.
type Options struct {
	// Dir holds a directory per lab (DefaultDir when empty).
	Dir string
	// Bin is the directory of the lispd and amptcp binaries; when empty,
	// the directory of this executable if lispd is there, else PATH.
	Bin string
	// Progress gets a line per step (nil: none).
	Progress io.Writer
	// Links makes the links that are not emulated; veth pairs when nil.
	Links LinkMaker
	// Firewall, when not nil, loads deploy/'s nftables rules in the
	// namespace of every node that runs amptcp's daemons, before they
	// start, as docs/deploy.md tells an operator.
	Firewall *Firewall
}

func (o *Options) dir(name string) string {
	base := o.Dir
	if base == "" {
		base = DefaultDir
	}
	return filepath.Join(base, name)
}

func (o *Options) progress(format string, args ...any) {
	if o.Progress != nil {
		fmt.Fprintf(o.Progress, format+"\n", args...)
	}
}

// State is what a lab is made of, as far as it was built: the state file.
type State struct {
	Name string `json:"name"`
	// Prefix starts the names of the lab's namespaces.
	Prefix     string    `json:"prefix"`
	Dir        string    `json:"dir"`
	Topology   string    `json:"topology,omitempty"`
	Namespaces []string  `json:"namespaces"`
	Links      []LinkEnd `json:"links"`
	Processes  []Process `json:"processes"`
	// Up is set once every daemon answered and every xTR registered.
	Up bool `json:"up"`
}

// LinkEnd is an interface the lab created, by its namespace and name.
type LinkEnd struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// Process is a daemon the lab started.
type Process struct {
	Node      string `json:"node"`
	Daemon    string `json:"daemon"` // lispd or pm
	Namespace string `json:"namespace"`
	PID       int    `json:"pid"`
	// StartTime is the process's start time in clock ticks after boot
	// (/proc/PID/stat): a PID with another start time is another process.
	StartTime uint64 `json:"start_time"`
	Socket    string `json:"socket"`
	Log       string `json:"log"`
}

// save writes the state file atomically: a crash leaves the old one or
// the new one.
func (s *State) save() error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(s.Dir, stateFile+".tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(s.Dir, stateFile)); err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	return nil
}

// ErrNotFound is returned for a lab without a state file.
var ErrNotFound = errors.New("no such lab")

// Load reads the state of the lab called name.
func Load(name string, opts Options) (*State, error) {
	b, err := os.ReadFile(filepath.Join(opts.dir(name), stateFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("lab %s: %w (no %s)", name, ErrNotFound, filepath.Join(opts.dir(name), stateFile))
	}
	if err != nil {
		return nil, err
	}
	var s State
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("lab %s: read state: %w", name, err)
	}
	return &s, nil
}
