package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"

	"github.com/amptcp/amptcp/lig"
)

// runLig asks a map-resolver for the mapping of an EID and prints the
// reply (RFC 6835), so that an operator can check what the mapping system
// answers without an xTR. Exit status: 0 with a reply, 1 without one or
// on a network error, 2 for bad arguments.
func runLig(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("lig", flag.ContinueOnError)
	flags.SetOutput(stderr)
	var opts lig.Options
	resolver := flags.String("m", "127.0.0.1", "map-resolver `RESOLVER`: host or host:port, port 4342 if none")
	flags.Func("i", "put the EID in instance `IID` (an Instance-ID LCAF)", func(s string) error {
		v, err := strconv.ParseUint(s, 10, 32)
		if err != nil {
			return errors.New("not a 32-bit unsigned number")
		}
		opts.IID, opts.HasIID = uint32(v), true
		return nil
	})
	flags.IntVar(&opts.Tries, "c", lig.DefaultTries, "send at most `COUNT` Map-Requests")
	opts.Timeout = lig.DefaultTimeout
	flags.Func("t", "wait `TIMEOUT` for each reply: a duration (500ms) or seconds (default 2s)", func(s string) error {
		d, err := parseTimeout(s)
		opts.Timeout = d
		return err
	})
	flags.Func("s", "`SOURCE` address for the reply (ITR-RLOC); default: the route's source toward RESOLVER", func(s string) error {
		a, err := netip.ParseAddr(s)
		opts.Source = a
		return err
	})
	flags.Func("e", "ask as the ITR of the site of `SOURCE-EID` (the request's source EID): a te role answers with that site's ELPs", func(s string) error {
		a, err := netip.ParseAddr(s)
		opts.SourceEID = a
		return err
	})
	jsonOut := flags.Bool("json", false, "print the result as one JSON object")
	trace := flags.Bool("trace", false, "follow the DDT referrals from RESOLVER, a DDT node (the root), and print each")
	flags.Usage = func() {
		fmt.Fprint(stderr, `usage: amptcp lig [-m RESOLVER] [-i IID] [-c COUNT] [-t TIMEOUT] [-s SOURCE] [-e SOURCE-EID] [-json] [-trace] EID

Sends an encapsulated Map-Request for the IPv4 or IPv6 address EID to a
map-resolver and prints the Map-Reply, from whoever answers it (the
map-server as a proxy, or the ETR): its EID-prefix, TTL and locators,
with each Explicit Locator Path hop by hop; with -e, the ELPs a
traffic-engineering map-server gives the ITR of SOURCE-EID's site (the
usable ones at a priority below 255). Each try uses a new nonce;
replies with a nonce not sent, and malformed packets, are ignored. With
no reply after COUNT tries it prints "*** No map-reply received ***"
and exits with status 1. Flags may also follow EID.

With -trace, RESOLVER is a LISP-DDT node (the root of the tree): lig
sends it a DDT Map-Request and follows the Map-Referrals down the tree,
COUNT tries at each level across the RLOCs of a referral set, printing
each referral, then the Map-Reply after the map-server's MS-ACK, or what
a negative referral says. Status 1 when a level gives no referral.
`)
		flags.PrintDefaults()
	}
	eids, err := parseInterleaved(flags, args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0
	case err != nil:
		return 2
	case len(eids) != 1:
		fmt.Fprintf(stderr, "amptcp lig: want one EID, got %d arguments\n", len(eids))
		flags.Usage()
		return 2
	case opts.Tries < 1:
		fmt.Fprintf(stderr, "amptcp lig: -c %d: want at least one try\n", opts.Tries)
		return 2
	}
	eid, err := netip.ParseAddr(eids[0])
	if err != nil {
		fmt.Fprintf(stderr, "amptcp lig: %s is not an IP address\n", eids[0])
		return 2
	}

	host, port, err := splitResolver(*resolver)
	if err != nil {
		fmt.Fprintf(stderr, "amptcp lig: -m %s: %v\n", *resolver, err)
		return 2
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if opts.Resolver, err = lookup(ctx, host, port); err != nil {
		fmt.Fprintf(stderr, "amptcp lig: map-resolver %s: %v\n", *resolver, err)
		return 1
	}
	if *trace { // the trace prints each request with its answer
		return printTrace(ctx, eid, opts, *jsonOut, stdout, stderr)
	}
	if !*jsonOut {
		opts.Logf = func(format string, args ...any) { fmt.Fprintf(stdout, format+"\n", args...) }
	}
	res, err := lig.Query(ctx, eid, opts)
	switch {
	case *jsonOut:
		if werr := lig.WriteJSON(stdout, res, err); werr != nil {
			fmt.Fprintf(stderr, "amptcp lig: %v\n", werr)
			return 1
		}
	case errors.Is(err, lig.ErrNoReply):
		fmt.Fprintln(stdout, lig.NoReplyText)
	case err != nil:
		fmt.Fprintf(stderr, "amptcp %v\n", err) // the error says "lig: "
	default:
		err = lig.WriteText(stdout, res)
	}
	if err != nil {
		return 1
	}
	return 0
}

// printTrace runs `lig -trace` and prints the referral chain.
func printTrace(ctx context.Context, eid netip.Addr, opts lig.Options, jsonOut bool, stdout, stderr io.Writer) int {
	res, err := lig.Trace(ctx, eid, opts)
	switch {
	case jsonOut:
		if werr := lig.WriteJSON(stdout, res, err); werr != nil {
			fmt.Fprintf(stderr, "amptcp lig: %v\n", werr)
			return 1
		}
	case errors.Is(err, lig.ErrNoReferral) && (res == nil || len(res.Hops) == 0):
		fmt.Fprintln(stdout, lig.NoReferralText)
	case errors.Is(err, lig.ErrNoReferral), errors.Is(err, lig.ErrNoReply):
		lig.WriteTraceText(stdout, res) // the hops so far; it says what is missing
		if errors.Is(err, lig.ErrNoReferral) {
			fmt.Fprintln(stdout, lig.NoReferralText)
		}
	case err != nil:
		if res != nil && len(res.Hops) > 0 {
			lig.WriteTraceText(stdout, res)
		}
		fmt.Fprintf(stderr, "amptcp %v\n", err) // the error says "lig: "
	default:
		err = lig.WriteTraceText(stdout, res)
	}
	if err != nil {
		return 1
	}
	return 0
}

// parseTimeout reads a duration, or a number of seconds as the original
// lig's -t took it.
func parseTimeout(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		secs, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil {
			return 0, errors.New("not a duration (500ms, 2s) or a number of seconds")
		}
		d = time.Duration(secs * float64(time.Second))
	}
	if d <= 0 {
		return 0, errors.New("must be positive")
	}
	return d, nil
}

// splitResolver reads RESOLVER: an address or a host name, with or
// without a port (4342 by default).
func splitResolver(s string) (host string, port uint16, err error) {
	host, port = s, lig.Port
	if h, p, err := net.SplitHostPort(s); err == nil {
		n, err := strconv.ParseUint(p, 10, 16)
		if err != nil {
			return "", 0, fmt.Errorf("bad port %q", p)
		}
		host, port = h, uint16(n)
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if host == "" {
		return "", 0, errors.New("no host")
	}
	return host, port, nil
}

// lookup finds the address of the map-resolver host, which may be a name.
func lookup(ctx context.Context, host string, port uint16) (netip.AddrPort, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return netip.AddrPortFrom(a, port), nil
	}
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return netip.AddrPort{}, err
	}
	return netip.AddrPortFrom(addrs[0].Unmap(), port), nil
}
