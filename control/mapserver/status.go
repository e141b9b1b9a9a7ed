package mapserver

import (
	"fmt"
	"sort"
	"time"
)

// Status is what `lispd status` shows of the map-server: every site, its
// configured prefixes, and what its ETRs registered, by whom and when.
type Status struct {
	Sites []SiteStatus `json:"sites"`
}

// SiteStatus is one site.
type SiteStatus struct {
	Name          string               `json:"name"`
	Prefixes      []string             `json:"prefixes"`
	Registrations []RegistrationStatus `json:"registrations"`
}

// RegistrationStatus is one registered EID-prefix.
type RegistrationStatus struct {
	EID   string `json:"eid"`
	Proxy bool   `json:"proxy_reply"`
	// Locators are the merged set Map-Replies carry, RLOCs and ELPs.
	Locators []LocatorStatus `json:"locators"`
	ETRs     []ETRStatus     `json:"etrs"`
}

// LocatorStatus is one locator of a registration.
type LocatorStatus struct {
	Address   string `json:"address"`
	Priority  uint8  `json:"priority"`
	Weight    uint8  `json:"weight"`
	Reachable bool   `json:"reachable"`
}

// ETRStatus is one ETR's registration.
type ETRStatus struct {
	Source     string    `json:"source"`
	XTRID      string    `json:"xtr_id,omitempty"`
	SiteID     uint64    `json:"site_id,omitempty"`
	ProxyReply bool      `json:"proxy_reply"`
	Merge      bool      `json:"merge"`
	First      time.Time `json:"first_registered"`
	Last       time.Time `json:"last_registered"`
	Expires    time.Time `json:"expires"`
	Registers  uint64    `json:"map_registers"`
	// Unacknowledged is the unsolicited Map-Notify of a merged set that
	// the ETR has not acknowledged yet.
	Unacknowledged *NotifyStatus `json:"unacknowledged_notify,omitempty"`
}

// NotifyStatus is an unsolicited Map-Notify awaiting its Map-Notify-Ack.
type NotifyStatus struct {
	Nonce string    `json:"nonce"`
	Since time.Time `json:"since"`
	Sends int       `json:"sends"`
}

// Status returns a snapshot of the sites and registrations, sorted.
func (s *Server) Status() Status {
	bySite := map[*Site][]RegistrationStatus{}
	s.mu.RLock()
	for e, v := range s.regs.All() {
		reg := v.reg
		rs := RegistrationStatus{EID: e.String(), Proxy: reg.Proxy}
		for _, l := range reg.locators {
			rs.Locators = append(rs.Locators, LocatorStatus{
				Address: l.Address.String(), Priority: l.Priority, Weight: l.Weight, Reachable: l.Reachable,
			})
		}
		for _, etr := range reg.ETRs {
			es := ETRStatus{
				Source: etr.Source.String(), ProxyReply: etr.ProxyReply, Merge: etr.Merge,
				First: etr.first.time(), Last: etr.last.time(), Expires: etr.expires.time(), Registers: etr.Registers,
			}
			if etr.XTRID != nil {
				es.XTRID, es.SiteID = fmt.Sprintf("%x", etr.XTRID.ID), etr.XTRID.SiteID
			}
			if p := etr.notify; p != nil {
				es.Unacknowledged = &NotifyStatus{Nonce: fmt.Sprintf("%#016x", p.nonce), Since: p.since, Sends: p.sends}
			}
			rs.ETRs = append(rs.ETRs, es)
		}
		bySite[reg.Site] = append(bySite[reg.Site], rs)
	}
	s.mu.RUnlock()
	var st Status
	for _, site := range s.sites {
		ss := SiteStatus{Name: site.Name, Registrations: bySite[site]}
		for _, p := range site.Prefixes {
			ss.Prefixes = append(ss.Prefixes, p.EID.String())
		}
		sort.Slice(ss.Registrations, func(i, j int) bool { return ss.Registrations[i].EID < ss.Registrations[j].EID })
		st.Sites = append(st.Sites, ss)
	}
	return st
}
