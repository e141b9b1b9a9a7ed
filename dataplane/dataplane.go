package dataplane

import (
	"errors"
	"log/slog"
	"net/netip"
	"time"

	"github.com/amptcp/amptcp/config"
)

// Options are what the data plane takes from outside its own section of
// the configuration.
type Options struct {
	MapCacheEntries int           // map-cache.max-entries
	MissInterval    time.Duration // map-cache.miss-interval
	Log             *slog.Logger
}

// Dataplane is the loaded and attached eBPF data plane. Its methods are
// safe for concurrent use.
type Dataplane struct {
	// filled in by the implementation
}

// Counters are the data plane's packet counters by name
// ("itr_encapsulated", "etr_decapsulated", "rtr_reencapsulated",
// "itr_miss_dropped", ...), summed over CPUs.
type Counters map[string]uint64

var errNotYet = errors.New("dataplane: not implemented yet")

// New loads the programs and maps, attaches the ITR to cfg's EID
// interfaces and the ETR/RTR to its RLOC interfaces. Close detaches them.
func New(cfg *config.Dataplane, opts Options) (*Dataplane, error) { return nil, errNotYet }

// Put installs or replaces a map-cache entry.
func (d *Dataplane) Put(k Key, e Entry) error { return errNotYet }

// Delete removes a map-cache entry; removing an absent one is no error.
func (d *Dataplane) Delete(k Key) error { return errNotYet }

// Misses delivers the EIDs packets found no entry for, at most one per
// EID per MissInterval. It is closed by Close.
func (d *Dataplane) Misses() <-chan Miss { return nil }

// LocalRLOCs are the addresses of the RLOC interfaces.
func (d *Dataplane) LocalRLOCs() []netip.Addr { return nil }

// Subflows lists the MPTCP subflows bound to paths.
func (d *Dataplane) Subflows() ([]Subflow, error) { return nil, errNotYet }

// Counters reads the packet counters.
func (d *Dataplane) Counters() (Counters, error) { return nil, errNotYet }

// Close detaches the programs and frees the maps.
func (d *Dataplane) Close() error { return nil }
