package dataplane

import (
	"fmt"

	"github.com/amptcp/amptcp/internal/ethtool"
)

// Offloads are the three offload settings a profile changes on a link's
// end, as `ethtool -k` names them: tcp-segmentation-offload (every TSO
// variant), generic-segmentation-offload and generic-receive-offload.
type Offloads struct {
	TSO bool `json:"tso"`
	GSO bool `json:"gso"`
	GRO bool `json:"gro"`
}

func (o Offloads) String() string {
	onOff := func(b bool) string {
		if b {
			return "on"
		}
		return "off"
	}
	return fmt.Sprintf("tso %s, gso %s, gro %s", onOff(o.TSO), onOff(o.GSO), onOff(o.GRO))
}

// fields pairs each setting with its field.
func (o *Offloads) fields() []struct {
	o  ethtool.Offload
	to *bool
} {
	return []struct {
		o  ethtool.Offload
		to *bool
	}{{ethtool.TSO, &o.TSO}, {ethtool.GSO, &o.GSO}, {ethtool.GRO, &o.GRO}}
}

// getOffloads reads the offloads of iface in the calling thread's
// namespace.
func getOffloads(iface string) (Offloads, error) {
	var o Offloads
	for _, f := range o.fields() {
		on, err := ethtool.Get(iface, f.o)
		if err != nil {
			return Offloads{}, err
		}
		*f.to = on
	}
	return o, nil
}

// setOffloads sets the offloads of iface in the calling thread's
// namespace; each is read back. One that is already as wanted is left
// alone: the kernel may have fixed it (a veth whose peer runs XDP cannot
// turn TSO on, nor off again).
func setOffloads(iface string, want Offloads) error {
	for _, f := range want.fields() {
		if on, err := ethtool.Get(iface, f.o); err == nil && on == *f.to {
			continue
		}
		if err := ethtool.Set(iface, f.o, *f.to); err != nil {
			return fmt.Errorf("set offloads of %s to %s: %w", iface, want, err)
		}
	}
	return nil
}
