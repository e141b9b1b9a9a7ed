package daemon

import (
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/amptcp/amptcp/config"
)

// Reload is what a configuration reload did: the settings it changed in
// the running lispd, those that changed in the file and take a restart
// (`lispd restart`, which keeps the data plane), or why it changed
// nothing.
type Reload struct {
	Time         time.Time `json:"time"`
	Applied      []string  `json:"applied,omitempty"`
	NeedsRestart []string  `json:"needs_restart,omitempty"`
	Error        string    `json:"error,omitempty"`
}

// Reload reads the configuration file again and applies what can change
// in a running lispd (SIGHUP): log.level; the map-resolvers, request
// timeout and retries; the probe interval and misses (with probing on);
// the static map-cache entries; the xtr's database mappings, which it
// registers at once, soliciting Map-Requests from the ITRs that use
// them. Everything else that changed waits for a restart, and the
// result says what. A file that does not load changes nothing.
func (d *Daemon) Reload() Reload {
	r := Reload{Time: time.Now()}
	next, err := d.loadConfig()
	if err == nil {
		err = d.apply(next, &r)
	}
	if err != nil {
		r.Error = err.Error()
		d.log.Error("configuration reload: nothing changed", "error", err)
	} else {
		d.log.Info("configuration reloaded", "applied", r.Applied, "needs_restart", r.NeedsRestart)
	}
	d.mu.Lock()
	d.lastReload = &r
	d.mu.Unlock()
	return r
}

func (d *Daemon) loadConfig() (*config.Config, error) {
	if d.opts.cfgFile == "" {
		return nil, errors.New("lispd was started without a configuration file")
	}
	return config.Load(d.opts.cfgFile)
}

// apply applies next where it differs from the running configuration
// and can change without a restart, and records in r what it did. The
// running configuration takes what was applied, so that a later reload
// still reports what waits for a restart.
func (d *Daemon) apply(next *config.Config, r *Reload) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	run := clone(d.cfg)
	changed := changedFields("", reflect.ValueOf(d.cfg), reflect.ValueOf(next))
	done := map[string]bool{}
	for _, field := range changed {
		if done[field] {
			continue
		}
		fields, err := d.applyField(field, run, next)
		if err != nil {
			return fmt.Errorf("%s: %w", field, err)
		}
		if fields == nil {
			r.NeedsRestart = append(r.NeedsRestart, field)
			continue
		}
		for _, f := range fields {
			done[f] = true
			if slices.Contains(changed, f) {
				r.Applied = append(r.Applied, f)
			}
		}
	}
	d.cfg = run
	return nil
}

// applyField applies one changed field to the running lispd and to run,
// and returns the fields that went with it, or nil when it takes a
// restart.
func (d *Daemon) applyField(field string, run, next *config.Config) ([]string, error) {
	t := d.tun
	switch field {
	case "log.level":
		if d.opts.level == nil {
			return nil, nil
		}
		var l slog.Level
		l.UnmarshalText([]byte(next.Log.Level)) // validated
		d.opts.level.Set(l)
		run.Log.Level = next.Log.Level
		return []string{field}, nil
	case "map-cache.map-resolvers", "map-cache.request-timeout", "map-cache.request-retries":
		if t == nil {
			return nil, nil
		}
		if err := t.cache.SetResolvers(next.MapCache); err != nil {
			return nil, err
		}
		run.MapCache.MapResolvers, run.MapCache.RequestTimeout = next.MapCache.MapResolvers, next.MapCache.RequestTimeout
		run.MapCache.RequestRetries = next.MapCache.RequestRetries
		return []string{"map-cache.map-resolvers", "map-cache.request-timeout", "map-cache.request-retries"}, nil
	case "map-cache.probe-interval", "map-cache.probe-misses":
		// Probing on or off changes what the map-cache is built with.
		if t == nil || t.prober == nil || next.MapCache.ProbeInterval.Duration == 0 {
			return nil, nil
		}
		if err := t.prober.SetSchedule(next.MapCache.ProbeInterval.Duration, next.MapCache.ProbeMisses); err != nil {
			return nil, err
		}
		run.MapCache.ProbeInterval, run.MapCache.ProbeMisses = next.MapCache.ProbeInterval, next.MapCache.ProbeMisses
		return []string{"map-cache.probe-interval", "map-cache.probe-misses"}, nil
	case "map-cache.static":
		if t == nil {
			return nil, nil
		}
		if _, err := t.cache.SetStatic(next.MapCache.Static, run.Dataplane.InstanceID); err != nil {
			return nil, err
		}
		run.MapCache.Static = next.MapCache.Static
		return []string{field}, nil
	case "xtr.database-mappings":
		if t == nil || run.XTR == nil {
			return nil, nil
		}
		if _, err := t.xtr.Update(next.XTR.DatabaseMappings); err != nil {
			return nil, err
		}
		if err := t.cache.SetLocal(t.xtr.LocalPrefixes()); err != nil {
			return nil, err
		}
		run.XTR.DatabaseMappings = next.XTR.DatabaseMappings
		return []string{field}, nil
	}
	return nil, nil
}

// clone copies a configuration deeply enough for apply to change the
// sections it applies in the copy.
func clone(c *config.Config) *config.Config {
	cp := *c
	if c.MapCache != nil {
		mc := *c.MapCache
		cp.MapCache = &mc
	}
	if c.XTR != nil {
		x := *c.XTR
		cp.XTR = &x
	}
	return &cp
}

// changedFields names, by their YAML paths, the fields of two values of
// a configuration struct that differ: structs (and pointers to them) are
// compared field by field, anything else as a whole.
func changedFields(path string, a, b reflect.Value) []string {
	if a.Kind() == reflect.Pointer && b.Kind() == reflect.Pointer && !a.IsNil() && !b.IsNil() && a.Elem().Kind() == reflect.Struct {
		return changedFields(path, a.Elem(), b.Elem())
	}
	if a.Kind() != reflect.Struct || a.Type() == reflect.TypeFor[config.Duration]() {
		if reflect.DeepEqual(a.Interface(), b.Interface()) {
			return nil
		}
		return []string{path}
	}
	var out []string
	for i := range a.NumField() {
		name, _, _ := strings.Cut(a.Type().Field(i).Tag.Get("yaml"), ",")
		if name == "" || name == "-" {
			continue
		}
		if path != "" {
			name = path + "." + name
		}
		out = append(out, changedFields(name, a.Field(i), b.Field(i))...)
	}
	return out
}
