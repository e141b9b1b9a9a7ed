package scenario

import (
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/amptcp/amptcp/lab/topo"
)

// Calibration fits one unknown parameter of a link, before the measured
// runs, so that a single-path TCP flow reaches the goodput the paper
// measured on that path: "calibrate on single-path TCP, then predict"
// (the MPTCP results are then out of sample; nothing is tuned on them).
type Calibration struct {
	// Link is the link whose parameter is fitted, in both directions or
	// in Direction's (a-to-b, b-to-a).
	Link      string `yaml:"link"`
	Direction string `yaml:"direction"`
	// Param is loss (a Bernoulli probability) or rate.
	Param string `yaml:"param"`
	// Between bounds the search: probabilities ("0.0001", "0.05") for
	// loss, rates ("1Mbit", "20Mbit") for rate.
	Between []string `yaml:"between"`
	// Flow is the single-path flow measured: a saturated TCP flow (its
	// protocol is tcp whatever it says), with its from-link and to-link
	// for multi-homed hosts.
	Flow Flow `yaml:"flow"`
	// Target is the paper's goodput on that path ("1.6Mbit"), Figure
	// where it says so; the fit stops once the mean of Runs flows is
	// within Tolerance of it (0.15 unless given), or after Steps steps
	// (8 unless given).
	Target    string  `yaml:"target"`
	Figure    string  `yaml:"figure"`
	Tolerance float64 `yaml:"tolerance"`
	Runs      int     `yaml:"runs"`
	Steps     int     `yaml:"steps"`
}

// The calibrated parameters.
const (
	ParamLoss = "loss"
	ParamRate = "rate"
)

// Calibration defaults.
const (
	DefaultTolerance = 0.15
	DefaultCalRuns   = 5
	DefaultCalSteps  = 8
)

// Bounds are the search's bounds as numbers: probabilities, or bit/s.
func (c *Calibration) Bounds() (lo, hi float64, err error) {
	if len(c.Between) != 2 {
		return 0, 0, fmt.Errorf("give the two ends of the search, like [0.0001, 0.05] or [1Mbit, 20Mbit]")
	}
	var v [2]float64
	for i, s := range c.Between {
		switch c.Param {
		case ParamLoss:
			v[i], err = strconv.ParseFloat(s, 64)
			if err == nil && !(v[i] > 0 && v[i] < 1) {
				err = fmt.Errorf("%s is not a probability between 0 and 1", s)
			}
		case ParamRate:
			v[i], err = topo.ParseRate(s)
		default:
			err = fmt.Errorf("the param is loss or rate")
		}
		if err != nil {
			return 0, 0, err
		}
	}
	if v[0] >= v[1] {
		return 0, 0, fmt.Errorf("%s is not below %s", c.Between[0], c.Between[1])
	}
	return v[0], v[1], nil
}

// Calibrated is the value a calibration found for its link.
type Calibrated struct {
	Link      string
	Direction string
	Param     string
	Value     float64
}

// Event is the timeline event that sets the value on a lab that is up.
func (c Calibrated) Event() topo.Event {
	ev := topo.Event{Link: c.Link, Action: topo.ActionSet, Direction: c.Direction}
	switch c.Param {
	case ParamLoss:
		p := c.Value
		ev.Loss = &topo.Loss{Bernoulli: &p}
	case ParamRate:
		ev.Rate = strconv.FormatFloat(math.Round(c.Value), 'f', 0, 64) + "bit"
	}
	return ev
}

// SetCalibrated makes the runs use the values found: their labs' links
// have them from the start.
func (s *Scenario) SetCalibrated(vals []Calibrated) { s.calibrated = slices.Clone(vals) }

// applyCalibrated puts the calibrated values into a topology's links
// (both directions of a link: a value for one direction is applied by
// the runner as an event at the start of each run, CalibratedEvents).
func (s *Scenario) applyCalibrated(t *topo.Topology) {
	for _, c := range s.calibrated {
		if c.Direction != "" {
			continue
		}
		for i := range t.Links {
			if t.Links[i].Name != c.Link {
				continue
			}
			ev := c.Event()
			t.Links[i].Rate = ev.Rate
			if ev.Loss != nil {
				t.Links[i].Loss = ev.Loss
			}
		}
	}
}

// CalibratedEvents are the values found for one direction of a link:
// the runner applies them when each run's lab is up.
func (s *Scenario) CalibratedEvents() []topo.Event {
	var evs []topo.Event
	for _, c := range s.calibrated {
		if c.Direction != "" {
			evs = append(evs, c.Event())
		}
	}
	return evs
}

// validate checks a calibration's fields.
func (c *Calibration) validate(path string, s *Scenario) []error {
	var errs []error
	add := func(field, format string, args ...any) {
		errs = append(errs, fieldErr(path+"."+field, format, args...))
	}
	if !slices.ContainsFunc(s.Topo.Links, func(l topo.Link) bool { return l.Name == c.Link && l.Emulated() }) {
		add("link", "%q is not an emulated link of the topology", c.Link)
	}
	if c.Direction != "" && c.Direction != "a-to-b" && c.Direction != "b-to-a" {
		add("direction", "%q is not a-to-b or b-to-a", c.Direction)
	}
	if c.Param != ParamLoss && c.Param != ParamRate {
		add("param", "%q is not loss or rate", c.Param)
	} else if _, _, err := c.Bounds(); err != nil {
		add("between", "%v", err)
	}
	if _, err := topo.ParseRate(c.Target); err != nil {
		add("target", "%v", err)
	}
	if c.Figure == "" {
		add("figure", "missing: where the paper gives the target")
	}
	if c.Tolerance < 0 || c.Tolerance >= 1 {
		add("tolerance", "%g is not a share between 0 and 1", c.Tolerance)
	}
	if c.Runs < 0 || c.Steps < 0 || c.Steps > 20 {
		add("runs", "runs and steps must not be negative, steps at most 20")
	}
	f := c.Flow
	f.Protocol = "tcp"
	if f.Name == "" {
		f.Name = "calibrate"
	}
	if f.Kind != KindSaturated {
		add("flow.kind", "a calibration measures a saturated flow")
	}
	errs = append(errs, s.validateFlow(path+".flow", &f, false, map[string]bool{})...)
	return errs
}

// defaults fills in a calibration's tolerance, runs and steps.
func (c *Calibration) defaults() {
	if c.Tolerance == 0 {
		c.Tolerance = DefaultTolerance
	}
	if c.Runs == 0 {
		c.Runs = DefaultCalRuns
	}
	if c.Steps == 0 {
		c.Steps = DefaultCalSteps
	}
	c.Flow.Protocol = "tcp"
	if c.Flow.Direction == "" {
		c.Flow.Direction = "upload"
	}
	if c.Flow.Name == "" {
		c.Flow.Name = "calibrate"
	}
}
