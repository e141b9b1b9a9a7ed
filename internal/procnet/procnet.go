// Package procnet reads the kernel's tables of sockets in /proc/.../net,
// where a process's (or a thread's) network namespace shows them.
package procnet

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// tcpListen is the state of a listening socket in /proc/net/tcp.
const tcpListen = "0A"

// TCPListening reports whether a TCP socket listens on port in the
// namespace of dir, a /proc/.../net directory: /proc/thread-self/net for
// the calling thread's namespace, /proc/PID/net for a process's. IPv4
// and IPv6 sockets count; an MPTCP listener shows as the TCP listener of
// its first subflow.
func TCPListening(dir string, port uint16) (bool, error) {
	var firstErr error
	for _, table := range []string{"tcp6", "tcp"} {
		b, err := os.ReadFile(filepath.Join(dir, table))
		if err != nil {
			firstErr = err
			continue
		}
		if ListensOn(b, port) {
			return true, nil
		}
	}
	return false, firstErr
}

// ListensOn reports whether a /proc/net/tcp or tcp6 table has a socket
// in the listening state on port.
func ListensOn(table []byte, port uint16) bool {
	sc := bufio.NewScanner(bytes.NewReader(table))
	sc.Scan() // the header
	for sc.Scan() {
		// sl local_address rem_address st ...; an address is HEX:PORT.
		f := strings.Fields(sc.Text())
		if len(f) < 4 || f[3] != tcpListen {
			continue
		}
		_, hexPort, ok := strings.Cut(f[1], ":")
		if p, err := strconv.ParseUint(hexPort, 16, 16); ok && err == nil && uint16(p) == port {
			return true
		}
	}
	return false
}

// Counters reads the protocol counters of the namespace of dir (see
// TCPListening): those of /proc/net/snmp as "Proto.Name"
// ("Tcp.InCsumErrors", "Udp.InCsumErrors"), and those of snmp6 by their
// names ("Udp6InCsumErrors").
func Counters(dir string) (map[string]uint64, error) {
	c := map[string]uint64{}
	b, err := os.ReadFile(filepath.Join(dir, "snmp"))
	if err != nil {
		return nil, err
	}
	// Pairs of lines: "Proto: names...", then "Proto: values...".
	var names []string
	for line := range strings.Lines(string(b)) {
		proto, rest, ok := strings.Cut(strings.TrimSpace(line), ": ")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if names == nil || names[0] != proto {
			names = append([]string{proto}, f...)
			continue
		}
		for i, v := range f {
			if n, err := strconv.ParseUint(v, 10, 64); err == nil && i+1 < len(names) {
				c[proto+"."+names[i+1]] = n
			}
		}
		names = nil
	}
	b, err = os.ReadFile(filepath.Join(dir, "snmp6"))
	if err != nil {
		return nil, err
	}
	for line := range strings.Lines(string(b)) {
		if f := strings.Fields(line); len(f) == 2 {
			if n, err := strconv.ParseUint(f[1], 10, 64); err == nil {
				c[f[0]] = n
			}
		}
	}
	return c, nil
}
