package dataplane

import (
	"errors"
	"fmt"

	"github.com/amptcp/amptcp/internal/ethtool"
)

// completed are the RLOC interfaces whose transmit checksum offload the
// data plane turned off (dataplane.complete-checksums), so that the
// kernel completes what leaves by them (docs/routers.md: on a veth, the
// hosts' unfinished checksums and GSO super-packets would reach the other
// namespace as they are), with a handle in their namespace to turn it on
// again.
type completed struct {
	h       *ethtool.Handle
	ifaces  []string
	adopted bool // from the lispd before, which forwards on if this one fails to start
}

// completeChecksums turns the offload off on the named interfaces, in the
// calling thread's namespace, where it is on. A data plane adopted from
// the lispd before (a restart) takes the interfaces it finds off as its
// own: that lispd turned them off and left them so, to be turned on again
// at the stop for good.
func completeChecksums(names []string, adopted bool) (*completed, error) {
	if len(names) == 0 {
		return nil, nil
	}
	h, err := ethtool.Open()
	if err != nil {
		return nil, fmt.Errorf("dataplane.complete-checksums: %w", err)
	}
	c := &completed{h: h, adopted: adopted}
	for i, name := range names {
		on, err := h.Get(name, ethtool.TxChecksum)
		switch {
		case err == nil && on:
			if err = h.Set(name, ethtool.TxChecksum, false); err == nil {
				c.ifaces = append(c.ifaces, name)
			}
		case err == nil && adopted:
			c.ifaces = append(c.ifaces, name)
		}
		if err != nil {
			return nil, errors.Join(fmt.Errorf("dataplane.complete-checksums[%d]: %w", i, err), c.restore())
		}
	}
	return c, nil
}

// restore turns the offload on again where completeChecksums turned it
// off; a nil c has nothing to do.
func (c *completed) restore() error {
	if c == nil {
		return nil
	}
	var errs []error
	for _, name := range c.ifaces {
		if err := c.h.Set(name, ethtool.TxChecksum, true); err != nil {
			errs = append(errs, fmt.Errorf("dataplane: restore checksum offload: %w", err))
		}
	}
	return errors.Join(append(errs, c.h.Close())...)
}

// release lets the interfaces be as they are, for the next lispd to
// adopt; a nil c has nothing to do.
func (c *completed) release() error {
	if c == nil {
		return nil
	}
	return c.h.Close()
}

// abort undoes completeChecksums for a data plane that failed to start:
// the one it was adopting forwards on, with the offload as it needs it.
func (c *completed) abort() error {
	if c != nil && c.adopted {
		return c.release()
	}
	return c.restore()
}
