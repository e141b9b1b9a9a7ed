// Package pm measures how soon an MPTCP connection uses a path again after
// the path failed and came back, with `amptcp pm` and with the kernel's
// own path manager in the same run, for `amptcp bench pm`.
//
// Each path manager gets a network of its own: a client with two links to
// a router and a server behind it, the client's second address routed over
// the second link, both links shaped to the same rate so that a saturating
// sender keeps both subflows busy. A repetition dials an MPTCP connection,
// waits until both of its subflows carry data, fails the second path for
// the outage, restores it, and times from then until every subflow of the
// connection has acknowledged new data (sock_diag, polled every 2 ms). The
// path managers and the kinds of failure take turns, so that the machine's
// noise falls on all alike.
package pm

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Options configure a run. The zero value of a field means its default.
type Options struct {
	// Variants are the path managers to measure (default: all, see
	// VariantNames).
	Variants []string
	// Failures are the kinds of failure (default: all, see FailureNames).
	Failures []string
	// Repetitions of every variant and failure (default 10).
	Repetitions int
	// Outage is how long the path stays failed (default 2s).
	Outage time.Duration
	// Timeout bounds the wait for the subflows after the path's return
	// (default 15s); a repetition that reaches it did not recover.
	Timeout time.Duration
	// Prefix starts the names of the namespaces (default
	// "amptcp-bpm-<pid>-"); LinkPrefix those of the interfaces, at most
	// 8 bytes (default "bp<pid in base 36>-").
	Prefix, LinkPrefix string
	// Progress, if not nil, receives a line on each phase and repetition.
	Progress func(line string)
}

// Defaults.
const (
	DefaultRepetitions = 10
	DefaultOutage      = 2 * time.Second
	DefaultTimeout     = 15 * time.Second
)

// RateMbps is the rate of each of the client's links.
const RateMbps = 100

// maxLinkPrefix leaves room for a link number and an end in 15 bytes.
const maxLinkPrefix = 8

// Validate fills in the defaults and returns every problem of the
// options at once.
func (o *Options) Validate() error {
	if len(o.Variants) == 0 {
		o.Variants = VariantNames()
	}
	if len(o.Failures) == 0 {
		o.Failures = FailureNames()
	}
	if o.Repetitions == 0 {
		o.Repetitions = DefaultRepetitions
	}
	if o.Outage == 0 {
		o.Outage = DefaultOutage
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Prefix == "" {
		o.Prefix = fmt.Sprintf("amptcp-bpm-%d-", os.Getpid())
	}
	if o.LinkPrefix == "" {
		o.LinkPrefix = "bp" + strconv.FormatInt(int64(os.Getpid())%(36*36*36*36), 36) + "-"
	}
	var errs []error
	errs = append(errs, known("variant", o.Variants, VariantNames())...)
	errs = append(errs, known("failure", o.Failures, FailureNames())...)
	if o.Repetitions < 1 || o.Repetitions > 1000 {
		errs = append(errs, fmt.Errorf("repetitions: %d is not between 1 and 1000", o.Repetitions))
	}
	if o.Outage < 100*time.Millisecond || o.Outage > 10*time.Minute {
		errs = append(errs, fmt.Errorf("outage: %s is not between 100ms and 10m", o.Outage))
	}
	if o.Timeout < time.Second || o.Timeout > 10*time.Minute {
		errs = append(errs, fmt.Errorf("timeout: %s is not between 1s and 10m", o.Timeout))
	}
	if strings.ContainsRune(o.Prefix, '/') {
		errs = append(errs, fmt.Errorf("prefix: %q contains a slash", o.Prefix))
	}
	if len(o.LinkPrefix) > maxLinkPrefix {
		errs = append(errs, fmt.Errorf("link prefix: %q is longer than %d bytes", o.LinkPrefix, maxLinkPrefix))
	}
	return errors.Join(errs...)
}

// known checks that every name is in names, and that none repeats.
func known(what string, got, names []string) []error {
	var errs []error
	for i, n := range got {
		switch {
		case !slices.Contains(names, n):
			errs = append(errs, fmt.Errorf("unknown %s %q (%s)", what, n, strings.Join(names, ", ")))
		case slices.Index(got, n) < i:
			errs = append(errs, fmt.Errorf("%s %q given twice", what, n))
		}
	}
	return errs
}

// Measurements is how many repairs a run times.
func (o *Options) Measurements() int { return o.Repetitions * len(o.Variants) * len(o.Failures) }

// Estimate is about how long a run of o takes (o validated): each
// repetition sets up a connection, holds the outage and waits for the
// repair, the kernel's for a few seconds.
func Estimate(o Options) time.Duration {
	o.Validate()
	per := 0 * time.Second
	for _, v := range o.Variants {
		per += o.Outage + variantByName(v).typical
	}
	return time.Duration(o.Repetitions*len(o.Failures))*per + 5*time.Second
}

// Variant is a path manager the bench measures.
type Variant struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	// typical is about how long a repetition takes beyond the outage.
	typical time.Duration
}

// Names of the variants.
const (
	VariantAMPTCP = "amptcp-pm"
	VariantKernel = "kernel"
)

var variants = []Variant{
	{VariantAMPTCP, "amptcp pm, policy fullmesh, the default repair settings (interval 250ms, stall-time 300ms)", 500 * time.Millisecond},
	{VariantKernel, "the kernel's in-kernel path manager, the client's second address an endpoint with the subflow flag", 1200 * time.Millisecond},
}

// VariantNames lists the variants in the order they take turns.
func VariantNames() []string { return namesOf(variants) }

func variantByName(name string) Variant { return byName(variants, name, Variant{Name: name}) }

// Failure is a way the second path fails.
type Failure struct {
	Name        string `json:"name"`
	Description string `json:"description"`
}

// Names of the failures.
const (
	FailureLink      = "link"
	FailureBlackhole = "blackhole"
)

var failures = []Failure{
	{FailureLink, "the router's end of the client's second link goes down and comes back up: the client sees its carrier go and return"},
	{FailureBlackhole, "the router drops what the server sends to the client's second address: nothing on the client tells"},
}

// FailureNames lists the failures in the order they take turns.
func FailureNames() []string { return namesOf(failures) }

func failureByName(name string) Failure { return byName(failures, name, Failure{Name: name}) }

// named is a Variant or a Failure.
type named interface{ name() string }

func (v Variant) name() string { return v.Name }
func (f Failure) name() string { return f.Name }

func namesOf[T named](list []T) []string {
	var names []string
	for _, x := range list {
		names = append(names, x.name())
	}
	return names
}

// byName is the item of list called name, or unknown.
func byName[T named](list []T, name string, unknown T) T {
	for _, x := range list {
		if x.name() == name {
			return x
		}
	}
	return unknown
}
