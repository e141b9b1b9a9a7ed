package resolver

import (
	"errors"
	"net/netip"

	"github.com/amptcp/amptcp/control"
	"github.com/amptcp/amptcp/mapping"
)

// Option changes how New builds the resolver.
type Option func(*options)

type options struct {
	sender control.Sender
}

// WithSender gives the resolver what it sends with outside its handlers:
// the retries of DDT Map-Requests, from Run. A resolver with DDT needs
// one.
func WithSender(s control.Sender) Option {
	return func(o *options) { o.sender = s }
}

func senderOf(opts []Option) control.Sender {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if o.sender == nil {
		return control.SenderFunc(func(netip.AddrPort, []byte) error {
			return errors.New("resolver: no sender for DDT retries")
		})
	}
	return o.sender
}

// resolveLocal asks the local database; without one, nothing is found
// locally.
func (r *Resolver) resolveLocal(iid uint32, eid netip.Addr) mapping.Answer {
	if r.db == nil {
		return mapping.Answer{Kind: mapping.NotFound}
	}
	return r.db.Resolve(iid, eid)
}
