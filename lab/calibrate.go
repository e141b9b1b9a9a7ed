package lab

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/amptcp/amptcp/internal/netns"
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
	err := func() (err error) {
		t := s.TopologyFor(nil)
		if _, err := Up(ctx, t, s.TopologyPath, opts.Lab); err != nil {
			return fmt.Errorf("up: %w", err)
		}
		defer func() {
			if derr := Down(t.Name, opts.Lab); derr != nil {
				err = errors.Join(err, fmt.Errorf("down: %w", derr))
			}
		}()
		plan, err := topo.Compile(t, opts.Lab.dir(t.Name))
		if err != nil {
			return err
		}
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
				g, err := calibrationFlow(ctx, plan, p)
				if err != nil {
					return err
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
	}()
	if err != nil {
		r.Error = err.Error()
	}
	return r
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
	var srv *traffic.Server
	err := (&netns.NS{Name: plan.Node(p.To).Namespace}).Do(func() (err error) {
		srv, err = traffic.Listen("0.0.0.0:"+strconv.Itoa(p.Port), traffic.ListenOptions{Protocol: traffic.TCP})
		return err
	})
	if err != nil {
		return 0, err
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
	err = (&netns.NS{Name: plan.Node(p.From).Namespace}).Do(func() (err error) {
		st, err = traffic.Dial(ctx, f, e.server(plan, p.Port))
		return err
	})
	if err != nil {
		return 0, err
	}
	if _, err := st.Run(ctx, rec); err != nil {
		return 0, err
	}
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline) && len(srv.Results()) == 0; {
		time.Sleep(10 * time.Millisecond)
	}
	for _, f := range results.Flows(rec.Records()) {
		if g := f.Goodput(); g > 0 {
			return g, nil
		}
	}
	return 0, errors.New("the calibration flow reported no goodput")
}
