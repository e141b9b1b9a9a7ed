package maprequest

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/amptcp/amptcp/daemon"
)

// profiled runs measure with lispd's CPU profile on, when Options.Profile
// asks for profiles, and names the files after phase.
func (r *run) profiled(phase string, measure func() error) error {
	if r.opts.Profile == "" {
		return measure()
	}
	if _, err := daemon.StartProfile(r.sock); err != nil {
		return fmt.Errorf("profile lispd: %w", err)
	}
	err := measure()
	p, perr := daemon.StopProfile(r.sock)
	if err != nil {
		return err
	}
	if perr != nil {
		return fmt.Errorf("profile lispd: %w", perr)
	}
	files := ProfileFiles{Phase: phase}
	for _, f := range []struct {
		from, what string
		to         *string
	}{
		{p.CPU, "cpu", &files.CPU}, {p.Trace, "trace", &files.Trace}, {p.AllocsBefore, "allocs-before", &files.AllocsBefore}, {p.Allocs, "allocs", &files.Allocs},
	} {
		*f.to = filepath.Join(r.opts.Profile, "lispd-"+phase+"."+f.what+filepath.Ext(f.from))
		if err := os.Rename(f.from, *f.to); err != nil {
			return fmt.Errorf("profile lispd: %w", err)
		}
	}
	r.res.Profiles = append(r.res.Profiles, files)
	return nil
}
