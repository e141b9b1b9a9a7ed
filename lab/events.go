package lab

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/amptcp/amptcp/lab/results"
	"github.com/amptcp/amptcp/lab/topo"
)

// labEvents applies timeline events to a lab that is up: a link's to
// its link daemon, an end's (down and up with end: a or b) to that
// node's interface, in its namespace, as a port that fails.
type labEvents struct {
	plan  *topo.Plan
	links EventApplier // nil: the lab has no link daemon
}

// errNoLinkControl: an event needs the link daemon, which the lab lacks.
var errNoLinkControl = errors.New("the lab has no link control (no emulated link, or its daemon is gone)")

func (le *labEvents) Apply(ev topo.Event) error {
	if ev.End == "" {
		if le.links == nil {
			return errNoLinkControl
		}
		return le.links.Apply(ev)
	}
	return setEnd(le.plan, ev)
}

// setEnd sets one end's interface of a link down or up.
func setEnd(plan *topo.Plan, ev topo.Event) error {
	var end *topo.End
	for _, l := range plan.Links {
		if l.Name == ev.Link {
			end = &l.A
			if ev.End == "b" {
				end = &l.B
			}
		}
	}
	if end == nil {
		return fmt.Errorf("link %s: not a link of lab %s", ev.Link, plan.Name)
	}
	h, err := handleAt(end.Namespace)
	if err != nil {
		return err
	}
	defer h.Close()
	l, err := h.LinkByName(end.Interface)
	if err != nil {
		return fmt.Errorf("link %s: %s's %s: %w", ev.Link, end.Node, end.Interface, err)
	}
	if ev.Action == topo.ActionUp {
		err = h.LinkSetUp(l)
	} else {
		err = h.LinkSetDown(l)
	}
	if err != nil {
		return fmt.Errorf("link %s: set %s's %s %s: %w", ev.Link, end.Node, end.Interface, ev.Action, err)
	}
	if ev.Action != topo.ActionUp {
		return nil
	}
	// The kernel removed the IPv4 routes through the interface when it
	// went down (the connected ones come back with it, not the others).
	n := plan.Node(end.Node)
	mine := topo.NodePlan{Name: n.Name, Namespace: n.Namespace}
	for _, r := range n.Routes {
		if r.Dev == end.Interface {
			mine.Routes = append(mine.Routes, r)
		}
	}
	for _, r := range n.SourceRoutes {
		if r.Dev == end.Interface {
			mine.SourceRoutes = append(mine.SourceRoutes, r)
		}
	}
	if err := addRoutes(mine, true); err != nil {
		return fmt.Errorf("link %s: %s's routes through %s: %w", ev.Link, end.Node, end.Interface, err)
	}
	return nil
}

// runControl applies the events a person gives during a run (the live
// view's controls) and keeps them for the run's record, marked manual.
type runControl struct {
	links  EventApplier
	t0     time.Time
	obs    Observer
	mu     sync.Mutex
	events []results.Event
	closed bool
}

func (rc *runControl) apply(ev topo.Event) error {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.closed {
		return errors.New("the run's flows have ended")
	}
	err := rc.links.Apply(ev)
	now := time.Now()
	re := results.Event{At: now.Sub(rc.t0), AppliedAfter: max(now.Sub(rc.t0), 1), Applied: now,
		Link: ev.Link, Action: string(ev.Action), Detail: ev.Detail(), Manual: true}
	if err != nil {
		re.Error = err.Error()
	}
	rc.events = append(rc.events, re)
	rc.obs.EventApplied(re)
	return err
}

// done ends the control and returns the events applied.
func (rc *runControl) done() []results.Event {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.closed = true
	return rc.events
}
