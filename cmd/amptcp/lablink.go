package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/amptcp/amptcp/lab"
)

// runLinkd is the lab's link daemon, `amptcp lab linkd -state DIR`,
// which `amptcp lab up` starts and `amptcp lab down` stops; not for
// people to run.
func runLinkd(args []string, stderr io.Writer) int {
	flags := flag.NewFlagSet("lab linkd", flag.ContinueOnError)
	flags.SetOutput(stderr)
	dir := flags.String("state", "", "the lab's directory (its links.json)")
	if err := flags.Parse(args); err != nil || *dir == "" || flags.NArg() != 0 {
		fmt.Fprintln(stderr, "usage: amptcp lab linkd -state DIR (amptcp lab up starts it)")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(stderr, nil)).With("daemon", "linkd")
	if err := lab.RunLinkd(ctx, *dir, log); err != nil {
		log.Error("link daemon failed", "err", err)
		return 1
	}
	return 0
}

// runLabLink is `amptcp lab link NAME LINK down|up|set [flags]`; the
// flags may come before, between or after the three arguments.
func runLabLink(args []string, stderr io.Writer, usage func()) int {
	flags := flag.NewFlagSet("lab link", flag.ContinueOnError)
	flags.SetOutput(stderr)
	flags.Usage = usage
	var opts lab.Options
	flags.StringVar(&opts.Dir, "dir", lab.DefaultDir, "the directory of the labs' state")
	direction := flags.String("direction", "", "a-to-b or b-to-a (default both)")
	rate := flags.String("rate", "", "set: the rate, like 8Mbit")
	delay := flags.String("delay", "", "set: the one-way delay, like 20ms")
	loss := flags.String("loss", "", "set: a Bernoulli loss probability, like 0.01 or 1%, or Gilbert-Elliott's as ge:P,R[,H,K]")
	queue := flags.String("queue", "", "set: the queue, like 64KB or 100 packets")
	pos, err := parseInterleaved(flags, args)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	} else if err != nil {
		return 2
	}
	if len(pos) != 3 {
		usage()
		return 2
	}
	ev, err := lab.LinkEvent(pos[1], pos[2], *direction, *rate, *delay, *loss, *queue)
	if err == nil {
		var links lab.LinkControl
		if links, err = lab.OpenLinks(pos[0], opts); err == nil {
			err = links.Apply(ev)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "amptcp lab link: %v\n", err)
		return 1
	}
	return 0
}
