package lab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/amptcp/amptcp/internal/ctlsock"
	"github.com/amptcp/amptcp/lab/linkemu"
	"github.com/amptcp/amptcp/lab/topo"
)

// The link daemon, `amptcp lab linkd -state DIR`, runs the link emulator
// of a lab in a process of its own: the emulator outlives `amptcp lab
// up`, and traffic in the emulator's own process would disturb its loop
// (docs/linkemu.md). It creates every emulated link of the lab, serves
// its control socket, and runs until SIGTERM; its TAP devices vanish
// with it, however it ends.
const (
	linkdDaemon = "linkd"
	// linksFile, in the lab's directory, holds the emulated links that
	// Up asks the link daemon for.
	linksFile   = "links.json"
	linkdSocket = "linkd.sock"
	linkdLog    = "linkd.log"
)

// emulatedLink is a link of the links file.
type emulatedLink struct {
	Name   string             `json:"name"`
	Config linkemu.LinkConfig `json:"config"`
}

// emulatedLinks are the plan's emulated links as the emulator takes
// them: both directions alike, the TAPs named and placed as the plan's
// ends, losses seeded by the lab's and the link's names so that a lab
// loses the same frames each time it is built.
func emulatedLinks(p *topo.Plan) []emulatedLink {
	var out []emulatedLink
	for _, l := range p.Links {
		if !l.Emulated {
			continue
		}
		h := fnv.New64a()
		h.Write([]byte(p.Name + "/" + l.Name))
		out = append(out, emulatedLink{Name: l.Name, Config: linkemu.LinkConfig{
			A:    linkemu.Endpoint{Namespace: l.A.Namespace, Name: l.A.Interface},
			B:    linkemu.Endpoint{Namespace: l.B.Namespace, Name: l.B.Interface},
			MTU:  l.MTU,
			AB:   l.Params,
			BA:   l.Params,
			Seed: h.Sum64(),
		}})
	}
	return out
}

func writeLinksFile(dir string, links []emulatedLink) error {
	b, err := json.MarshalIndent(links, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, linksFile), b, 0o600)
}

func readLinksFile(dir string) ([]emulatedLink, error) {
	b, err := os.ReadFile(filepath.Join(dir, linksFile))
	if err != nil {
		return nil, err
	}
	var links []emulatedLink
	if err := json.Unmarshal(b, &links); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, linksFile), err)
	}
	if len(links) == 0 {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, linksFile), ErrNoEmulatedLinks)
	}
	return links, nil
}

// RunLinkd is the link daemon of the lab whose directory is dir: it
// creates the emulated links of its links file and answers on its
// control socket until ctx is done, then removes the links.
func RunLinkd(ctx context.Context, dir string, log *slog.Logger) error {
	specs, err := readLinksFile(dir)
	if err != nil {
		return err
	}
	em, err := linkemu.New(log)
	if err != nil {
		return err
	}
	defer em.Close()
	d := &linkd{links: map[string]*linkemu.Link{}}
	for _, s := range specs {
		l, err := em.AddLink(s.Config)
		if err != nil {
			return fmt.Errorf("link %s: %w", s.Name, err)
		}
		d.links[s.Name] = l
		d.names = append(d.names, s.Name)
		log.Info("link up", "link", s.Name, "a", s.Config.A.Namespace+"/"+s.Config.A.Name,
			"b", s.Config.B.Namespace+"/"+s.Config.B.Name, "rate", s.Config.AB.Rate, "delay", s.Config.AB.Delay)
	}
	ln, err := ctlsock.Listen(filepath.Join(dir, linkdSocket), "link daemon")
	if err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	log.Info("serving", "links", len(specs), "socket", ln.Addr().String())
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				log.Info("stopping")
				return nil
			}
			return fmt.Errorf("control socket: %w", err)
		}
		go answerLinks(conn, d.apply, d.stats)
	}
}

// linkd holds the daemon's links.
type linkd struct {
	// mu makes each event one step: a set of both directions checks both
	// before it changes either.
	mu    sync.Mutex
	links map[string]*linkemu.Link
	names []string // in the plan's order
}

func (d *linkd) apply(ev topo.Event) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	l := d.links[ev.Link]
	if l == nil {
		return fmt.Errorf("link %q is not an emulated link of this lab (those are: %s)", ev.Link, strings.Join(d.names, ", "))
	}
	dirs, err := directions(ev.Direction)
	if err != nil {
		return err
	}
	switch ev.Action {
	case topo.ActionDown, topo.ActionUp:
		for _, dir := range dirs {
			if err := l.SetDown(dir, ev.Action == topo.ActionDown); err != nil {
				return err
			}
		}
		return nil
	case topo.ActionSet, "":
		cfg, err := l.Config()
		if err != nil {
			return err
		}
		var next []linkemu.Params
		for _, dir := range dirs {
			p := *cfg.Params(dir)
			if err := setParams(&p, ev, cfg.MTU); err != nil {
				return fmt.Errorf("link %s %s: %w", ev.Link, dir, err)
			}
			next = append(next, p)
		}
		for i, dir := range dirs {
			if err := l.Set(dir, next[i]); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("action %q is not down, up or set", ev.Action)
}

func (d *linkd) stats() (map[string]linkemu.Stats, error) {
	out := map[string]linkemu.Stats{}
	var errs []error
	for name, l := range d.links {
		s, err := l.Stats()
		if err != nil {
			errs = append(errs, fmt.Errorf("link %s: %w", name, err))
			continue
		}
		out[name] = s
	}
	return out, errors.Join(errs...)
}

// sortedLinkNames are the names of a stats map, sorted, to print them.
func sortedLinkNames(m map[string]linkemu.Stats) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// startLinkd notes the emulated links' ends in the state, writes the
// links file, starts the link daemon, which creates them, and waits for
// its control socket.
func (b *builder) startLinkd(ctx context.Context, links []emulatedLink) error {
	for _, l := range links {
		b.st.Links = append(b.st.Links, LinkEnd{l.Config.A.Namespace, l.Config.A.Name}, LinkEnd{l.Config.B.Namespace, l.Config.B.Name})
	}
	if err := b.st.save(); err != nil {
		return err
	}
	if err := writeLinksFile(b.plan.Dir, links); err != nil {
		return err
	}
	amptcp, err := findBinary(b.opts.Bin, "amptcp")
	if err != nil {
		return err
	}
	p := Process{Daemon: linkdDaemon, Socket: filepath.Join(b.plan.Dir, linkdSocket), Log: filepath.Join(b.plan.Dir, linkdLog)}
	if err := b.startProcess(p, amptcp, "lab", "linkd", "-state", b.plan.Dir); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, ReadyTimeout)
	defer cancel()
	return b.waitFor(ctx, b.st.Processes[len(b.st.Processes)-1])
}
