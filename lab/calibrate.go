package lab

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/amptcp/amptcp/internal/netns"
	"github.com/amptcp/amptcp/lab/linkemu"
	"github.com/amptcp/amptcp/lab/results"
	"github.com/amptcp/amptcp/lab/scenario"
	"github.com/amptcp/amptcp/lab/topo"
	"github.com/amptcp/amptcp/lab/traffic"
)

// calibratePort serves the calibration's flows: below the fidelity's.
const calibratePort = 4998

// calibrate runs the scenario's calibrations, each in a lab of the
// scenario's topology brought up for it (with the values found before
// it), and makes the runs use what they found.
func calibrate(ctx context.Context, s *scenario.Scenario, opts RunOptions) []results.Calibration {
	var out []results.Calibration
	var found []scenario.Calibrated
	for _, c := range s.Calibrate {
		r := calibrateOne(ctx, s, c, opts)
		out = append(out, r)
		if r.Error == "" {
			found = append(found, scenario.Calibrated{Link: c.Link, Direction: c.Direction, Param: c.Param, Value: r.Value})
			s.SetCalibrated(found)
		}
		progressf(opts, "calibration of %s %s: %s", c.Link, c.Param, r)
	}
	return out
}

func progressf(opts RunOptions, format string, args ...any) {
	if opts.Progress != nil {
		fmt.Fprintf(opts.Progress, format+"\n", args...)
	}
}

// calibrateOne searches the calibration's range, halving it on a log
// scale: goodput falls as loss rises and rises with the rate.
func calibrateOne(ctx context.Context, s *scenario.Scenario, c scenario.Calibration, opts RunOptions) results.Calibration {
	target, _ := topo.ParseRate(c.Target)
	r := results.Calibration{Link: c.Link, Direction: c.Direction, Param: c.Param, Target: target, Figure: c.Figure, Tolerance: c.Tolerance, Steps: []results.CalibrationStep{}}
	lo, hi, _ := c.Bounds() // validated
	err := withLab(ctx, s.TopologyFor(nil), s.TopologyPath, opts.Lab, func(plan *topo.Plan) error {
		links, err := OpenLinks(plan.Name, opts.Lab)
		if err != nil {
			return err
		}
		le := &labEvents{plan: plan, links: links}
		for _, ev := range s.CalibratedEvents() {
			if err := le.Apply(ev); err != nil {
				return err
			}
		}
		p := scenario.Planned{Flow: c.Flow, Port: calibratePort}
		if err := warm(ctx, plan, []scenario.Planned{p}); err != nil {
			return fmt.Errorf("warm up: %w", err)
		}
		best := math.Inf(1)
		for range c.Steps {
			v := math.Sqrt(lo * hi)
			ev := scenario.Calibrated{Link: c.Link, Direction: c.Direction, Param: c.Param, Value: v}.Event()
			if err := le.Apply(ev); err != nil {
				return err
			}
			st := results.CalibrationStep{Value: v}
			for range c.Runs {
				before, err := links.Stats()
				if err != nil {
					return err
				}
				g, err := calibrationFlow(ctx, plan, p)
				if err != nil {
					return err
				}
				after, err := links.Stats()
				if err != nil {
					return err
				}
				// The flow must have crossed the link it calibrates.
				bytes := g * p.Duration.Seconds() / 8
				if !carried(before, after, c.Link, c.Direction, bytes/2) {
					return fmt.Errorf("the calibration flow's data did not cross link %s: give its from-link and to-link so that it does", c.Link)
				}
				st.Goodput = append(st.Goodput, g)
				st.Mean += g / float64(c.Runs)
			}
			r.Steps = append(r.Steps, st)
			miss := math.Abs(st.Mean-target) / target
			if miss < best {
				best, r.Value = miss, v
			}
			if miss <= c.Tolerance {
				r.Met = true
				return nil
			}
			// Loss: too fast means too little loss; rate: too slow means
			// too little rate.
			if (st.Mean > target) == (c.Param == scenario.ParamLoss) {
				lo = v
			} else {
				hi = v
			}
		}
		return nil
	})
	if err != nil {
		r.Error = err.Error()
	}
	return r
}

// carried says whether the link, in that direction (either for ""),
// took at least bytes between two snapshots of the counters.
func carried(before, after map[string]linkemu.Stats, link, direction string, bytes float64) bool {
	return slices.ContainsFunc(crossed(before, after, func(_, b uint64) bool { return float64(b) >= bytes }),
		func(d linkDir) bool { return d.link == link && (direction == "" || d.dir.String() == direction) })
}

// calibrationFlow runs the calibration's flow once, a saturated TCP flow
// from its client's address, and returns its receiver's goodput.
func calibrationFlow(ctx context.Context, plan *topo.Plan, p scenario.Planned) (float64, error) {
	e := flowEnds(p, false)
	f := traffic.Flow{ID: "calibration", Kind: traffic.Saturate, Protocol: traffic.TCP, CongestionControl: p.CC,
		Duration: p.Duration.Duration, Local: e.client(plan)}
	if p.Direction == "download" {
		f.Direction = traffic.Download
	}
	_, recs, err := oneFlow(ctx, plan, e, f, "0.0.0.0:"+strconv.Itoa(p.Port), e.server(plan, p.Port), nil)
	if err != nil {
		return 0, err
	}
	for _, f := range results.Flows(recs) {
		if g := f.Goodput(); g > 0 {
			return g, nil
		}
	}
	return 0, errors.New("the calibration flow reported no goodput")
}

// oneFlow runs one stream flow between two hosts that are up: its
// server on listen in the receiving end's namespace, its client dialing
// addr from the other's. onStart, if not nil, is called once the client
// has connected, and what it returns once the flow ended. It returns the
// client's result and the records of both ends, the server's last one
// included.
func oneFlow(ctx context.Context, plan *topo.Plan, e ends, f traffic.Flow, listen, addr string, onStart func(time.Time) func()) (traffic.Result, []traffic.Record, error) {
	var srv *traffic.Server
	err := (&netns.NS{Name: plan.Node(e.to).Namespace}).Do(func() (err error) {
		srv, err = traffic.Listen(listen, traffic.ListenOptions{Protocol: f.Protocol})
		return err
	})
	if err != nil {
		return traffic.Result{}, nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, f.Duration+time.Minute)
	defer cancel()
	rec := &traffic.Collector{}
	served := make(chan struct{})
	go func() {
		defer close(served)
		srv.Serve(ctx, rec)
	}()
	defer func() {
		srv.Close()
		<-served
	}()
	var st *traffic.Stream
	start := time.Now()
	err = (&netns.NS{Name: plan.Node(e.from).Namespace}).Do(func() (err error) {
		st, err = traffic.Dial(ctx, f, addr)
		return err
	})
	if err != nil {
		return traffic.Result{}, nil, err
	}
	ended := func() {}
	if onStart != nil {
		ended = onStart(start)
	}
	res, err := st.Run(ctx, rec)
	st.Close()
	ended()
	if err != nil {
		return res, nil, err
	}
	// The server's last record may still be on its way.
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline) && len(srv.Results()) == 0; {
		time.Sleep(10 * time.Millisecond)
	}
	return res, rec.Records(), nil
}
