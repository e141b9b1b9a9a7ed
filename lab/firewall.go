package lab

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/amptcp/amptcp/deploy"
	"github.com/amptcp/amptcp/internal/netns"
	"github.com/amptcp/amptcp/lab/topo"
)

// Firewall is the firewall of docs/deploy.md, on the lab's nodes that
// run amptcp's daemons: the ruleset of deploy/nftables, with the rules
// of the node's daemons included, loaded with nft -f in the node's
// namespace. The underlay's routers, which run none, have no firewall.
type Firewall struct {
	// Services are rules for the hosts' own applications, which an
	// operator writes in a file of /etc/nftables.d beside amptcp's
	// ("tcp dport 5201 accept"): services.nft.
	Services []string
}

// ServicesRules is the file of a host's Firewall.Services.
const ServicesRules = "services.nft"

// loadFirewall puts the firewall's files where node n keeps
// /etc/nftables.conf and /etc/nftables.d (beside what stands for
// /etc/amptcp) and loads the ruleset in its namespace, as an operator
// would: nft -f /etc/nftables.conf.
func (b *builder) loadFirewall(n topo.NodePlan) error {
	fw := b.opts.Firewall
	if fw == nil {
		return nil
	}
	var rules []string
	if n.Lispd != nil {
		rules = append(rules, deploy.LispdRules)
	}
	if n.PM != nil {
		rules = append(rules, deploy.PMRules)
	}
	if len(rules) == 0 {
		return nil
	}
	etc := filepath.Dir(b.plan.EtcDir(n.Name))
	dir := filepath.Join(etc, "nftables.d")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, name := range rules {
		text, err := deploy.Rules(name)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, name), text, 0o644); err != nil {
			return err
		}
	}
	if n.Role == topo.RoleHost && len(fw.Services) > 0 {
		text := "# The host's applications (docs/deploy.md).\n" + strings.Join(fw.Services, "\n") + "\n"
		if err := os.WriteFile(filepath.Join(dir, ServicesRules), []byte(text), 0o644); err != nil {
			return err
		}
	}
	ruleset, err := deploy.Host{NFTables: dir}.Ruleset()
	if err != nil {
		return err
	}
	conf := filepath.Join(etc, deploy.NFTablesConf)
	if err := os.WriteFile(conf, ruleset, 0o644); err != nil {
		return err
	}
	nft, err := exec.LookPath("nft")
	if err != nil {
		return fmt.Errorf("firewall: no nft (scripts/deps.sh installs nftables): %w", err)
	}
	cmd := exec.Command(nft, "-f", conf)
	var out []byte
	err = (&netns.NS{Name: n.Namespace}).Do(func() (err error) {
		out, err = cmd.CombinedOutput()
		return err
	})
	if err != nil {
		return fmt.Errorf("firewall: nft -f %s: %w\n%s", conf, err, out)
	}
	b.opts.progress("%s: firewall loaded (%s, %s)", n.Name, deploy.NFTablesConf, strings.Join(rules, ", "))
	return nil
}
