package scenario

import (
	"fmt"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/amptcp/amptcp/config"
)

// ShortKeys are what a scenario's short: block may give: each replaces
// the full version's. The topology, the claims and the name stay: the
// short version checks the same claims on the same network, with fewer
// or shorter runs.
var ShortKeys = []string{"repetitions", "variants", "flows", "flow-sets", "failures", "sizes", "timeout", "calibrate", "fidelity"}

// applyShort decodes the scenario again with the short block's keys in
// place of the full version's.
func applyShort(data []byte, short yaml.Node) (Scenario, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return Scenario{}, err
	}
	if short.Kind != yaml.MappingNode {
		return Scenario{}, config.Errors{{Path: "short", Msg: "a mapping of what the short version changes (" + strings.Join(ShortKeys, ", ") + ")"}}
	}
	top := doc.Content[0]
	var errs config.Errors
	for i := 0; i+1 < len(short.Content); i += 2 {
		key, val := short.Content[i].Value, short.Content[i+1]
		if !slices.Contains(ShortKeys, key) {
			errs = append(errs, config.FieldError{Path: "short." + key, Msg: "the short version changes only " + strings.Join(ShortKeys, ", ")})
			continue
		}
		replaced := false
		for j := 0; j+1 < len(top.Content); j += 2 {
			if top.Content[j].Value == key {
				top.Content[j+1], replaced = val, true
			}
		}
		if !replaced {
			top.Content = append(top.Content, short.Content[i], val)
		}
	}
	if len(errs) > 0 {
		return Scenario{}, errs
	}
	for j := 0; j+1 < len(top.Content); j += 2 {
		if top.Content[j].Value == "short" {
			top.Content = append(top.Content[:j], top.Content[j+2:]...)
			break
		}
	}
	b, err := yaml.Marshal(&doc)
	if err != nil {
		return Scenario{}, fmt.Errorf("short version: %w", err)
	}
	var s Scenario
	if err := config.Decode(b, &s); err != nil {
		return Scenario{}, fmt.Errorf("short version: %w", err)
	}
	s.Short = true
	return s, nil
}
