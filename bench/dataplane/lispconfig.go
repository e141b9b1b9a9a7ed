package dataplane

import (
	"fmt"
	"strings"
)

// The keys the sites register with.
const (
	keySiteA = "amptcp bench site-a"
	keySiteB = "amptcp bench site-b"
)

// mapServerConfig is the lispd of the mapping system: map-server and
// map-resolver for both sites, answering for their ETRs (proxy-reply).
// Site b may register more-specifics of the prefixes in moreB too.
func mapServerConfig(sock, listen string, moreB ...string) string {
	more := ""
	for _, p := range moreB {
		more += ", {prefix: " + p + ", accept-more-specifics: true}"
	}
	return `# amptcp bench dataplane: the mapping system
roles: [map-server, map-resolver]
listen: ["` + listen + `"]
log: {level: info}
control: {socket: "` + sock + `"}
map-server:
  sites:
    - name: site-a
      keys: [{id: 0, algorithm: hmac-sha256, secret: "` + keySiteA + `"}]
      eid-prefixes: [{prefix: ` + siteA + `}]
    - name: site-b
      keys: [{id: 0, algorithm: hmac-sha256, secret: "` + keySiteB + `"}]
      eid-prefixes: [{prefix: ` + siteB + `}` + more + `]
map-resolver:
  rate-limit: {per-second: 0}
`
}

// xtrSpec is what differs between the two xTRs of a variant.
type xtrSpec struct {
	sock      string
	rloc      string   // the RLOC, also where lispd listens
	eidIface  string   // toward the site's host
	rlocIface string   // toward the underlay
	eidPrefix string   // the site's
	key       string   // the site's
	elp       []string // if not empty, the site is registered with this ELP (RTRs, then rloc) instead of rloc alone
	resolver  string   // map-resolver and map-server
	// xdp decapsulates in XDP on the RLOC interface (dataplane.xdp-interfaces).
	xdp bool
	// gpe are the RLOCs sent LISP-GPE (dataplane.lisp-gpe.peers).
	gpe []string
	// miss is dataplane.miss ("": the default); more are more EID-prefixes
	// of the site, each registered as a mapping of its own.
	miss string
	more []string
}

// xtrConfig is the lispd of a site's edge router: ITR for its host's
// packets, ETR for the packets to it.
func xtrConfig(x xtrSpec) string {
	var loc string
	if len(x.elp) > 0 {
		loc = fmt.Sprintf("{elp: [%s], priority: 1, weight: 100}", strings.Join(x.elp, ", "))
	} else {
		loc = fmt.Sprintf("{address: %s, priority: 1, weight: 100}", x.rloc)
	}
	xdp := ""
	if x.xdp {
		xdp = "\n  xdp-interfaces: [" + x.rlocIface + "]"
	}
	if x.miss != "" {
		xdp += "\n  miss: " + x.miss
	}
	xdp += gpePeers(x.gpe)
	more := ""
	for _, p := range x.more {
		more += "\n    - {eid-prefix: " + p + ", locators: [" + loc + "]}"
	}
	return `# amptcp bench dataplane: the xTR of ` + x.eidPrefix + `
roles: [xtr]
listen: ["` + x.rloc + `"]
log: {level: info}
control: {socket: "` + x.sock + `"}
dataplane:
  eid-interfaces: [` + x.eidIface + `]
  rloc-interfaces: [` + x.rlocIface + `]` + xdp + `
map-cache:
  map-resolvers: ["` + x.resolver + `"]
xtr:
  database-mappings:
    - eid-prefix: ` + x.eidPrefix + `
      locators: [` + loc + `]` + more + `
  map-servers:
    - {address: "` + x.resolver + `", key-id: 0, algorithm: hmac-sha256, secret: "` + x.key + `", proxy-reply: true}
`
}

// gpePeers is the dataplane's lisp-gpe section for peers, if any.
func gpePeers(peers []string) string {
	if len(peers) == 0 {
		return ""
	}
	return "\n  lisp-gpe: {peers: [" + strings.Join(peers, ", ") + "]}"
}

// rtrConfig is the lispd of the middle router: it re-encapsulates the
// packets of the ELPs that name it, with LISP-GPE to gpe.
func rtrConfig(sock string, listen, rlocIfaces []string, resolver string, gpe []string) string {
	return `# amptcp bench dataplane: the RTR
roles: [rtr]
listen: ["` + strings.Join(listen, `", "`) + `"]
log: {level: info}
control: {socket: "` + sock + `"}
dataplane:
  rloc-interfaces: [` + strings.Join(rlocIfaces, ", ") + `]` + gpePeers(gpe) + `
map-cache:
  map-resolvers: ["` + resolver + `"]
`
}
