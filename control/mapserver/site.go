package mapserver

import (
	"fmt"
	"sync"

	"github.com/amptcp/amptcp/config"
	"github.com/amptcp/amptcp/lisp"
	"github.com/amptcp/amptcp/mapping"
)

// Site is a LISP site as configured: the EID-prefixes its ETRs may
// register and the keys they authenticate with.
type Site struct {
	Name                 string
	AllowUnauthenticated bool
	ProxyReply           bool
	AntiReplay           bool
	Prefixes             []SitePrefix
	// keys, searched in turn: a site has a few, and a map's lookup cost
	// a Map-Register 0.1 µs in lispd's profile, its memory out of the
	// CPU's caches after the system calls.
	keys []siteKey
}

// SitePrefix is an EID-prefix a site may register.
type SitePrefix struct {
	EID                 mapping.EID
	AcceptMoreSpecifics bool
	site                *Site
}

// siteKey is a shared secret, by its Key ID and algorithm, with the
// Authenticators that verify and sign with it, reused across messages:
// building one costs more than hashing a Map-Register.
type siteKey struct {
	id    uint8
	alg   lisp.AuthAlgorithm
	auths *sync.Pool // *lisp.Authenticator
}

func newSiteKey(id uint8, alg lisp.AuthAlgorithm, secret []byte) (siteKey, error) {
	if _, err := lisp.NewAuthenticator(alg, secret); err != nil {
		return siteKey{}, err
	}
	k := siteKey{id: id, alg: alg, auths: &sync.Pool{}}
	k.auths.New = func() any {
		a, _ := lisp.NewAuthenticator(alg, secret) // checked above
		return a
	}
	return k, nil
}

// newSites builds the sites of a validated configuration and the table of
// their prefixes.
func newSites(cfg []config.Site) ([]*Site, *mapping.Table[*SitePrefix], error) {
	table := mapping.NewTable[*SitePrefix]()
	var sites []*Site
	for _, c := range cfg {
		s := &Site{
			Name:                 c.Name,
			AllowUnauthenticated: c.AllowUnauthenticated,
			ProxyReply:           c.ProxyReply == nil || *c.ProxyReply,
			AntiReplay:           c.AntiReplay == nil || *c.AntiReplay,
		}
		for _, k := range c.Keys {
			alg, err := config.AuthAlgorithm(k.Algorithm)
			if err != nil {
				return nil, nil, fmt.Errorf("site %s: key %d: %w", c.Name, k.ID, err)
			}
			secret, err := k.Bytes()
			if err != nil {
				return nil, nil, fmt.Errorf("site %s: key %d: %w", c.Name, k.ID, err)
			}
			key, err := newSiteKey(k.ID, alg, secret)
			if err != nil {
				return nil, nil, fmt.Errorf("site %s: key %d: %w", c.Name, k.ID, err)
			}
			s.keys = append(s.keys, key)
		}
		for _, e := range c.EIDPrefixes {
			p, err := e.Parse()
			if err != nil {
				return nil, nil, fmt.Errorf("site %s: %w", c.Name, err)
			}
			sp := &SitePrefix{EID: mapping.NewEID(e.InstanceID, p), AcceptMoreSpecifics: e.AcceptMoreSpecifics, site: s}
			if _, dup := table.Get(sp.EID); dup {
				return nil, nil, fmt.Errorf("site %s: %s belongs to another site", c.Name, sp.EID)
			}
			s.Prefixes = append(s.Prefixes, *sp)
			table.Insert(sp.EID, sp)
		}
		sites = append(sites, s)
	}
	return sites, table, nil
}

// key returns the key for a Key ID and algorithm.
func (s *Site) key(id uint8, alg lisp.AuthAlgorithm) (*siteKey, bool) {
	for i := range s.keys {
		if k := &s.keys[i]; k.id == id && k.alg == alg {
			return k, true
		}
	}
	return nil, false
}

// admits finds the site prefix under which e may be registered: e itself,
// or one that contains e and accepts more-specifics. A more-specific
// prefix under several configured ones takes the longest.
func admits(table *mapping.Table[*SitePrefix], e mapping.EID) (*SitePrefix, bool) {
	covering, sp, ok := table.Covering(e)
	for ok {
		if covering == e || sp.AcceptMoreSpecifics {
			return sp, true
		}
		// A shorter configured prefix may accept more-specifics.
		if covering.Prefix.Bits() == 0 {
			break
		}
		parent, _ := covering.Prefix.Addr().Prefix(covering.Prefix.Bits() - 1)
		covering, sp, ok = table.Covering(mapping.EID{IID: e.IID, Prefix: parent})
	}
	return nil, false
}
