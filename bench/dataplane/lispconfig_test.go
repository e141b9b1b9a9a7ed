package dataplane

import (
	"slices"
	"testing"

	"github.com/amptcp/amptcp/config"
)

// TestLispdConfigs checks that the configurations the lisp variants give
// lispd are valid for this repository's parser, and say what they should.
func TestLispdConfigs(t *testing.T) {
	ms, err := config.Parse([]byte(mapServerConfig("/tmp/ms.sock", "10.0.100.2")))
	if err != nil {
		t.Fatalf("map-server: %v", err)
	}
	if !ms.Has(config.RoleMapServer) || !ms.Has(config.RoleMapResolver) || len(ms.MapServer.Sites) != 2 ||
		ms.MapServer.Sites[1].EIDPrefixes[0].Prefix != siteB || !*ms.MapServer.Sites[1].ProxyReply {
		t.Errorf("map-server: %+v", ms.MapServer)
	}

	plain := xtrSpec{sock: "/tmp/r3.sock", rloc: "10.0.13.3", eidIface: "ab1-9b", rlocIface: "ab1-8b",
		eidPrefix: siteB, key: keySiteB, resolver: "10.0.100.2"}
	viaRTR := plain
	viaRTR.rloc, viaRTR.elp, viaRTR.gpe = "10.0.23.3", []string{"10.0.12.2", "10.0.23.3"}, []string{underlay}
	for _, tc := range []struct {
		name    string
		spec    xtrSpec
		locator config.LocatorConfig
	}{
		{"plain", plain, config.LocatorConfig{Address: "10.0.13.3", Priority: 1, Weight: 100}},
		{"elp", viaRTR, config.LocatorConfig{ELP: []config.ELPHop{{Address: "10.0.12.2"}, {Address: "10.0.23.3"}}, Priority: 1, Weight: 100}},
	} {
		c, err := config.Parse([]byte(xtrConfig(tc.spec)))
		if err != nil {
			t.Fatalf("xtr %s: %v", tc.name, err)
		}
		dm := c.XTR.DatabaseMappings
		if len(dm) != 1 || dm[0].EIDPrefix != siteB || len(dm[0].Locators) != 1 {
			t.Fatalf("xtr %s: database-mappings %+v", tc.name, dm)
		}
		got := dm[0].Locators[0]
		if got.Address != tc.locator.Address || len(got.ELP) != len(tc.locator.ELP) || got.Priority != 1 || got.Weight != 100 {
			t.Errorf("xtr %s: locator %+v, want %+v", tc.name, got, tc.locator)
		}
		for i := range got.ELP {
			if got.ELP[i] != tc.locator.ELP[i] {
				t.Errorf("xtr %s: ELP hop %d = %+v, want %+v", tc.name, i, got.ELP[i], tc.locator.ELP[i])
			}
		}
		if c.Dataplane.EIDInterfaces[0] != "ab1-9b" || c.Dataplane.RLOCInterfaces[0] != "ab1-8b" ||
			c.MapCache.MapResolvers[0] != "10.0.100.2" || c.XTR.MapServers[0].Secret != keySiteB ||
			!c.XTR.MapServers[0].ProxyReply || c.Listen[0] != tc.spec.rloc {
			t.Errorf("xtr %s: %+v %+v %+v", tc.name, c.Dataplane, c.MapCache, c.XTR.MapServers)
		}
		if !slices.Equal(c.Dataplane.LISPGPE.Peers, tc.spec.gpe) {
			t.Errorf("xtr %s: lisp-gpe %+v, want peers %v", tc.name, c.Dataplane.LISPGPE, tc.spec.gpe)
		}
	}

	rtr, err := config.Parse([]byte(rtrConfig("/tmp/r2.sock", []string{"10.0.12.2", "10.0.23.2"}, []string{"ab1-5b", "ab1-6a"}, "10.0.100.2", []string{underlay})))
	if err != nil {
		t.Fatalf("rtr: %v", err)
	}
	if !rtr.Has(config.RoleRTR) || len(rtr.Dataplane.RLOCInterfaces) != 2 || len(rtr.Listen) != 2 || rtr.XTR != nil ||
		!slices.Equal(rtr.Dataplane.LISPGPE.Peers, []string{underlay}) {
		t.Errorf("rtr: %+v", rtr)
	}
}
