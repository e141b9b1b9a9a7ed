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
