package maprequest

import (
	"bufio"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// startReference runs the reference server command on where's server
// CPUs, with as many workers, and reads the address it listens on. Its input is a pipe that only the bench holds:
// when the bench ends, however it ends, the server reads EOF and exits.
func startReference(argv []string, sizes EchoSizes, where placement, dir string) (*proc, netip.AddrPort, error) {
	var none netip.AddrPort
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, none, fmt.Errorf("start the reference server: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, none, fmt.Errorf("start the reference server: %w", err)
	}
	argv = append(argv[:len(argv):len(argv)],
		"-reply-size", strconv.Itoa(sizes.Reply), "-notify-size", strconv.Itoa(sizes.Notify), "-workers", strconv.Itoa(where.n))
	p, err := startPinned("reference server", argv, where.servers, where.n, filepath.Join(dir, "reference.log"), inR, outW)
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, none, err
	}
	p.input = inW
	line := make(chan string, 1)
	go func() {
		defer outR.Close()
		s, _ := bufio.NewReader(outR).ReadString('\n')
		line <- strings.TrimSpace(s)
	}()
	select {
	case s := <-line:
		addr, err := netip.ParseAddrPort(s)
		if err != nil {
			p.stop()
			return nil, none, fmt.Errorf("start the reference server: it printed %q, not its address: %w", s, p.failure())
		}
		return p, addr, nil
	case <-time.After(10 * time.Second):
		p.stop()
		return nil, none, fmt.Errorf("start the reference server: no address within 10s")
	}
}
