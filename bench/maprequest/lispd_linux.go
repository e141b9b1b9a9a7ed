package maprequest

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/amptcp/amptcp/config"
	"github.com/amptcp/amptcp/daemon"
)

// lispdConfig is the configuration of the lispd under test: both mapping
// roles on loopback with a port the kernel picks, nothing that expires
// during the run, no rate limit (the generator is one source sending
// hundreds of thousands of requests per second), no anti-replay (the
// Map-Registers are signed before the run, numbered, and sent again as
// they are when their Map-Notify is lost, as from xTRs with random
// nonces), and warnings only, so that logging costs nothing per message.
func lispdConfig(sock string) string {
	return `roles: [map-server, map-resolver]
listen: ["127.0.0.1:0"]
log: {level: warn}
control: {socket: ` + sock + `}
map-server:
  registration-timeout: 1h
  sites:
    - name: bench
      keys: [{id: 0, algorithm: hmac-sha256, secret: "` + siteKey + `"}]
      proxy-reply: true
      anti-replay: false
      eid-prefixes:
        - {prefix: ` + siteA + `, accept-more-specifics: true}
        - {prefix: ` + siteB + `, accept-more-specifics: true}
map-resolver:
  rate-limit: {per-second: 0}
`
}

// lispd is the running lispd under test.
type lispd struct {
	*proc
	sock string
	addr netip.AddrPort // where it listens
}

// startLispd writes the configuration into dir, checks it with this
// package's own config parser (a lispd of another version may disagree,
// which the start then reports), starts lispd pinned to cpu and waits
// until its control socket tells where it listens. It serves with a loop
// on each of where's CPUs. With profiles, a directory, lispd may be told
// to profile itself there.
func startLispd(ctx context.Context, path, dir string, where placement, profiles string) (*lispd, error) {
	sock := filepath.Join(dir, "lispd.sock")
	cfgPath := filepath.Join(dir, "lispd.yaml")
	text := lispdConfig(sock)
	if _, err := config.Parse([]byte(text)); err != nil {
		return nil, fmt.Errorf("check lispd configuration: %w", err)
	}
	if err := os.WriteFile(cfgPath, []byte(text), 0o600); err != nil {
		return nil, fmt.Errorf("write lispd configuration: %w", err)
	}
	argv := []string{path, "-config", cfgPath}
	if where.n > 1 { // without, a lispd older than -cpus runs too
		argv = append(argv, "-cpus", strconv.Itoa(where.n))
	}
	if profiles != "" {
		argv = append(argv, "-profile", profiles)
	}
	p, err := startPinned("lispd", argv, where.servers, where.n, filepath.Join(dir, "lispd.log"), nil, nil)
	if err != nil {
		return nil, err
	}
	l := &lispd{proc: p, sock: sock}
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := daemon.QueryStatus(sock)
		if err == nil {
			if len(st.Listen) != 1 || (st.Loops != where.n && (st.Loops != 0 || where.n != 1)) {
				l.stop()
				return nil, fmt.Errorf("lispd listens on %v with %d loops, want one address and %d", st.Listen, st.Loops, where.n)
			}
			if l.addr, err = netip.ParseAddrPort(st.Listen[0]); err != nil {
				l.stop()
				return nil, fmt.Errorf("read lispd's address: %w", err)
			}
			return l, nil
		}
		switch {
		case p.exited():
			return nil, p.failure()
		case ctx.Err() != nil:
			l.stop()
			return nil, ctx.Err()
		case time.Now().After(deadline):
			l.stop()
			return nil, fmt.Errorf("lispd did not answer on %s within 10s: %w", sock, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// pinning describes where a process may run, as the kernel says.
func pinning(pid int) string {
	st, err := procStatus(pid)
	if err != nil {
		return "unknown"
	}
	return "cpus " + strings.TrimSpace(st["Cpus_allowed_list"])
}
