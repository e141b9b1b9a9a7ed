package live

import (
	"math"
	"math/rand/v2"
	"time"

	"github.com/amptcp/amptcp/lab/results"
	"github.com/amptcp/amptcp/lab/topo"
)

// Topology is the current run's network as the page draws it: its nodes
// placed (Layout), its links with their configuration and what they
// carry now.
type Topology struct {
	Name  string `json:"name"`
	Nodes []Node `json:"nodes"`
	Links []Link `json:"links"`
}

// Node is a node of the topology, at X, Y in [0, 1].
type Node struct {
	Name string  `json:"name"`
	Role string  `json:"role"`
	Site string  `json:"site,omitempty"`
	X    float64 `json:"x"`
	Y    float64 `json:"y"`
}

// Link is a link between nodes A and B (indexes into Nodes), its
// emulation (a veth link has none) and its state now.
type Link struct {
	Name     string `json:"name"`
	A        int    `json:"a"`
	B        int    `json:"b"`
	Emulated bool   `json:"emulated,omitempty"`
	// Rate (bit/s), Delay (one way) and Loss (a rate in [0, 1]) as
	// configured, and as changed by the run's events.
	Rate  float64       `json:"rate_bps,omitempty"`
	Delay time.Duration `json:"delay_ns,omitempty"`
	Loss  float64       `json:"loss,omitempty"`
	// Down: the link drops everything; EndDown: an end's interface is
	// down (a, b).
	Down    bool    `json:"down,omitempty"`
	EndDown [2]bool `json:"end_down,omitzero"`
	// Load is what each direction (a-to-b, b-to-a) delivered over the
	// last sampling interval, in Mbit/s (the emulator's counters, headers
	// included).
	Load [2]float64 `json:"load"`

	last [2]results.LinkSample // the previous sample of each direction
}

// newTopology converts a lab's topology, placing its nodes.
func newTopology(t *topo.Topology) *Topology {
	out := &Topology{Name: t.Name, Nodes: make([]Node, len(t.Nodes)), Links: make([]Link, 0, len(t.Links))}
	index := make(map[string]int, len(t.Nodes))
	for i, n := range t.Nodes {
		out.Nodes[i] = Node{Name: n.Name, Role: string(n.Role), Site: n.Site}
		index[n.Name] = i
	}
	for _, l := range t.Links {
		if len(l.Ends) != 2 {
			continue
		}
		a, okA := index[l.Ends[0]]
		b, okB := index[l.Ends[1]]
		if !okA || !okB {
			continue
		}
		lk := Link{Name: l.Name, A: a, B: b, Load: [2]float64{}}
		if p, ok := l.Params(); ok {
			lk.Emulated, lk.Rate, lk.Delay, lk.Loss = true, p.Rate, p.Delay, p.Loss.Rate()
		}
		out.Links = append(out.Links, lk)
	}
	layout(out)
	return out
}

// link returns the named link, or nil.
func (t *Topology) link(name string) *Link {
	for i := range t.Links {
		if t.Links[i].Name == name {
			return &t.Links[i]
		}
	}
	return nil
}

// applyEvent updates a link's state after an event: down and up of the
// link or of one end, and what a set changes. It reports whether the
// link is the topology's.
func (t *Topology) applyEvent(ev topo.Event) bool {
	l := t.link(ev.Link)
	if l == nil {
		return false
	}
	down := ev.Action == topo.ActionDown
	switch {
	case ev.Action == topo.ActionSet:
		if r, err := topo.ParseRate(ev.Rate); err == nil {
			l.Rate = r
		}
		if d, err := time.ParseDuration(ev.Delay); err == nil {
			l.Delay = d
		}
		if ev.Loss != nil {
			if m, err := ev.Loss.Model(); err == nil {
				l.Loss = m.Rate()
			}
		}
	case ev.End == "a":
		l.EndDown[0] = down
	case ev.End == "b":
		l.EndDown[1] = down
	default:
		l.Down = down
	}
	return true
}

// sample takes a round of the links' counters and sets each link
// direction's load from its delivered bytes since the previous one. It
// reports whether a load changed.
func (t *Topology) sample(round []results.LinkSample) bool {
	changed := false
	for _, s := range round {
		l := t.link(s.Link)
		if l == nil {
			continue
		}
		d := 0
		if s.Direction == "b-to-a" {
			d = 1
		}
		prev := l.last[d]
		l.last[d] = s
		dt := s.Time.Sub(prev.Time).Seconds()
		if prev.Time.IsZero() || dt <= 0 || s.DeliveredBytes < prev.DeliveredBytes {
			continue
		}
		load := float64(s.DeliveredBytes-prev.DeliveredBytes) * 8 / dt / 1e6
		if math.Abs(load-l.Load[d]) > 1e-3 {
			l.Load[d], changed = load, true
		}
	}
	return changed
}

// loads are every link's loads in the links' order, for an update.
func (t *Topology) loads() [][2]float64 {
	out := make([][2]float64, len(t.Links))
	for i, l := range t.Links {
		out[i] = l.Load
	}
	return out
}

// copy is a copy of the topology that the lock no longer guards.
func (t *Topology) copy() *Topology {
	c := *t
	c.Nodes = append([]Node(nil), t.Nodes...)
	c.Links = append([]Link(nil), t.Links...)
	return &c
}

// layout places the nodes with Fruchterman and Reingold's forces (links
// pull, every pair of nodes pushes) from a start on a circle in the
// file's order, with a fixed seed for the jitter: the same topology is
// drawn the same each time. Its cost is the number of nodes squared per
// step; the steps go down as the graph grows, so that a topology of a
// thousand links is placed in well under a second.
func layout(t *Topology) {
	n := len(t.Nodes)
	if n == 0 {
		return
	}
	if n == 1 {
		t.Nodes[0].X, t.Nodes[0].Y = 0.5, 0.5
		return
	}
	x, y := make([]float64, n), make([]float64, n)
	rng := rand.New(rand.NewPCG(uint64(n), uint64(len(t.Links))))
	for i := range n {
		a := 2 * math.Pi * float64(i) / float64(n)
		x[i], y[i] = math.Cos(a)+0.01*rng.Float64(), math.Sin(a)+0.01*rng.Float64()
	}
	k := math.Sqrt(4 / float64(n)) // the ideal distance on a 2 x 2 square
	steps := max(50, min(300, 200000/(n*n)))
	dx, dy := make([]float64, n), make([]float64, n)
	temp := 0.2
	for range steps {
		clear(dx)
		clear(dy)
		for i := range n {
			for j := i + 1; j < n; j++ {
				ex, ey := x[i]-x[j], y[i]-y[j]
				d2 := max(ex*ex+ey*ey, 1e-6)
				f := k * k / d2
				dx[i] += ex * f
				dy[i] += ey * f
				dx[j] -= ex * f
				dy[j] -= ey * f
			}
		}
		for _, l := range t.Links {
			if l.A == l.B {
				continue
			}
			ex, ey := x[l.A]-x[l.B], y[l.A]-y[l.B]
			d := max(math.Hypot(ex, ey), 1e-3)
			f := d / k
			dx[l.A] -= ex * f
			dy[l.A] -= ey * f
			dx[l.B] += ex * f
			dy[l.B] += ey * f
		}
		for i := range n {
			d := max(math.Hypot(dx[i], dy[i]), 1e-9)
			step := min(d, temp)
			x[i] += dx[i] / d * step
			y[i] += dy[i] / d * step
		}
		temp = max(temp*0.97, 0.002)
	}
	minX, maxX, minY, maxY := x[0], x[0], y[0], y[0]
	for i := range n {
		minX, maxX, minY, maxY = min(minX, x[i]), max(maxX, x[i]), min(minY, y[i]), max(maxY, y[i])
	}
	scale := max(maxX-minX, maxY-minY, 1e-9)
	for i := range n {
		t.Nodes[i].X = 0.05 + 0.9*(x[i]-minX)/scale
		t.Nodes[i].Y = 0.05 + 0.9*(y[i]-minY)/scale
	}
}
