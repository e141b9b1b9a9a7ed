package lig

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/amptcp/amptcp/lisp"
)

// The JSON form of a Result, for scripts and tests. Field names are
// lower_snake; the nonce is a hex string because JSON numbers lose 64-bit
// integers in most readers (jq, JavaScript); iid is null without an
// Instance-ID LCAF.
type (
	jsonResult struct {
		Resolver  string       `json:"resolver"`
		Source    string       `json:"source"`
		EID       string       `json:"eid"`
		IID       *uint32      `json:"iid"`
		Nonce     string       `json:"nonce"`
		Tries     int          `json:"tries"`
		RTTMs     float64      `json:"rtt_ms"`
		Replier   string       `json:"replier"`
		Ignored   int          `json:"ignored"`
		Malformed int          `json:"malformed"`
		Records   []jsonRecord `json:"records"`
		Referrals []jsonHop    `json:"referrals,omitempty"` // a trace's, from the root down
	}
	jsonHop struct {
		Node          string   `json:"node"`
		RTTMs         float64  `json:"rtt_ms"`
		Tries         int      `json:"tries"`
		Action        string   `json:"action"`
		EID           string   `json:"eid"`
		IID           *uint32  `json:"iid"`
		MaskLen       uint8    `json:"mask_len"`
		TTLMinutes    uint32   `json:"ttl_minutes"`
		Authoritative bool     `json:"authoritative"`
		Incomplete    bool     `json:"incomplete"`
		Referrals     []string `json:"referrals"`
	}
	jsonRecord struct {
		EID           string        `json:"eid"`
		IID           *uint32       `json:"iid"`
		MaskLen       uint8         `json:"mask_len"`
		TTLMinutes    uint32        `json:"ttl_minutes"`
		Action        string        `json:"action"`
		Authoritative bool          `json:"authoritative"`
		MapVersion    uint16        `json:"map_version"`
		Locators      []jsonLocator `json:"locators"`
	}
	jsonLocator struct {
		Address   string       `json:"address"`
		AFI       lisp.AFI     `json:"afi"`
		Priority  uint8        `json:"priority"`
		Weight    uint8        `json:"weight"`
		MPriority uint8        `json:"m_priority"`
		MWeight   uint8        `json:"m_weight"`
		Local     bool         `json:"local"`
		Probed    bool         `json:"probed"`
		Reachable bool         `json:"reachable"`
		ELP       []jsonELPHop `json:"elp,omitempty"`
	}
	jsonELPHop struct {
		Address   string `json:"address"`
		Lookup    bool   `json:"lookup"`
		RLOCProbe bool   `json:"rloc_probe"`
		Strict    bool   `json:"strict"`
	}
	jsonError struct {
		Error     string `json:"error"`
		Tries     int    `json:"tries"`
		Ignored   int    `json:"ignored"`
		Malformed int    `json:"malformed"`
	}
)

// WriteJSON writes r as one JSON object and a newline. With err not nil
// it writes {"error": ..., "tries": ...} instead, r giving the counts if
// not nil; ErrNoReply reads "no map-reply received". A locator's address
// is its whole string form; an Explicit Locator Path in it is also listed
// hop by hop under "elp".
func WriteJSON(w io.Writer, r *Result, err error) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // keep "->" in ELP strings readable
	// A trace that ended at a negative referral answered without a reply.
	if err == nil && (r == nil || (r.Reply == nil && len(r.Hops) == 0)) {
		err = ErrNoReply
	}
	if err != nil {
		e := jsonError{Error: err.Error()}
		if errors.Is(err, ErrNoReply) {
			e.Error = "no map-reply received"
		}
		if r != nil {
			e.Tries, e.Ignored, e.Malformed = r.Tries, r.Ignored, r.Malformed
		}
		return enc.Encode(e)
	}
	eid, iid := splitEID(r.EID)
	out := jsonResult{
		Resolver: r.Resolver.String(), Source: r.Source.String(),
		EID: eid, IID: iid,
		Nonce: fmt.Sprintf("%#016x", r.Nonce), Tries: r.Tries,
		RTTMs:   float64(r.RTT) / float64(time.Millisecond),
		Replier: r.Replier.String(), Ignored: r.Ignored, Malformed: r.Malformed,
		Records: []jsonRecord{},
	}
	if r.Reply != nil {
		for _, rec := range r.Reply.Records {
			out.Records = append(out.Records, recordJSON(rec))
		}
	}
	for _, h := range r.Hops {
		out.Referrals = append(out.Referrals, hopJSON(h))
	}
	return enc.Encode(out)
}

func recordJSON(rec lisp.MapRecord) jsonRecord {
	eid, iid := splitEID(rec.EID)
	out := jsonRecord{
		EID: eid, IID: iid, MaskLen: rec.MaskLen, TTLMinutes: rec.TTL,
		Action: rec.Action.String(), Authoritative: rec.Authoritative, MapVersion: rec.MapVersion,
		Locators: make([]jsonLocator, 0, len(rec.Locators)),
	}
	for _, l := range rec.Locators {
		loc := jsonLocator{
			Address: l.Address.String(), AFI: l.Address.AFI(),
			Priority: l.Priority, Weight: l.Weight, MPriority: l.MPriority, MWeight: l.MWeight,
			Local: l.Local, Probed: l.Probed, Reachable: l.Reachable,
		}
		if _, elp := splitLocator(l.Address); elp != nil {
			loc.ELP = make([]jsonELPHop, len(elp.Hops))
			for i, h := range elp.Hops {
				loc.ELP[i] = jsonELPHop{Address: h.Address.String(), Lookup: h.Lookup, RLOCProbe: h.RLOCProbe, Strict: h.Strict}
			}
		}
		out.Locators = append(out.Locators, loc)
	}
	return out
}

func hopJSON(h Hop) jsonHop {
	rec := h.Referral
	eid, iid := splitEID(rec.EID)
	out := jsonHop{Node: h.Node.String(), RTTMs: float64(h.RTT) / float64(time.Millisecond), Tries: h.Tries,
		Action: rec.Action.String(), EID: eid, IID: iid, MaskLen: rec.MaskLen, TTLMinutes: rec.TTL,
		Authoritative: rec.Authoritative, Incomplete: rec.Incomplete, Referrals: []string{}}
	for _, l := range rec.Referrals {
		out.Referrals = append(out.Referrals, l.Address.String())
	}
	return out
}

// splitEID takes an EID out of its Instance-ID LCAF, if it has one.
func splitEID(a lisp.Address) (eid string, iid *uint32) {
	if l, ok := a.LCAF().(*lisp.InstanceID); ok {
		id := l.IID
		return l.Address.String(), &id
	}
	return a.String(), nil
}
