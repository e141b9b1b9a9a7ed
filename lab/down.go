package lab

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/amptcp/amptcp/internal/netns"
	"github.com/amptcp/amptcp/lab/topo"
)

// stopGrace is how long Down waits after SIGTERM before SIGKILL.
const stopGrace = 3 * time.Second

// Down takes the lab called name down: its daemons, every other process
// in its namespaces, its links, its namespaces and its directory. It is
// idempotent, and works from what the state file says and from the
// namespaces' names when the state file is gone or incomplete.
func Down(name string, opts Options) error {
	st, err := Load(name, opts)
	if errors.Is(err, ErrNotFound) {
		st = &State{Name: name, Prefix: topo.NamespacePrefix + name + "-", Dir: opts.dir(name)}
	} else if err != nil {
		return err
	}
	var errs []error
	for _, p := range st.Processes {
		if alive, _ := running(p); !alive {
			continue
		}
		opts.progress("%s: stopping %s, pid %d", p.Node, p.Daemon, p.PID)
		// The daemon leads its process group: signal the group, so that
		// what it forked goes too.
		stop(p.PID, -p.PID, func() bool { alive, _ := running(p); return alive })
	}
	namespaces, err := labNamespaces(st, opts)
	if err != nil {
		errs = append(errs, err)
	}
	for _, ns := range namespaces {
		if err := stopProcessesIn(ns, opts); err != nil {
			errs = append(errs, err)
		}
		resetSockets(ns, opts)
	}
	for _, l := range st.Links {
		if err := deleteLink(l); err != nil {
			errs = append(errs, err)
		}
	}
	for _, ns := range namespaces {
		if err := netns.Delete(ns); err != nil {
			errs = append(errs, err)
		}
	}
	if len(namespaces) > 0 {
		opts.progress("namespaces: %d deleted", len(namespaces))
	}
	if err := errors.Join(errs...); err != nil {
		return err // keep the state, for another try
	}
	if err := os.RemoveAll(st.Dir); err != nil {
		return err
	}
	opts.progress("lab %s is down", name)
	return nil
}

// labNamespaces are the lab's namespaces: those of the state file and
// those that carry its prefix, but not those of another lab whose name
// starts like this one's ("demo" and "demo-2").
func labNamespaces(st *State, opts Options) ([]string, error) {
	found, err := netns.List(st.Prefix)
	if err != nil {
		return st.Namespaces, err
	}
	others, _ := filepath.Glob(filepath.Join(filepath.Dir(opts.dir(st.Name)), "*", stateFile))
	var otherPrefixes []string
	for _, f := range others {
		other := filepath.Base(filepath.Dir(f))
		if other != st.Name && strings.HasPrefix(topo.NamespacePrefix+other+"-", st.Prefix) {
			otherPrefixes = append(otherPrefixes, topo.NamespacePrefix+other+"-")
		}
	}
	out := slices.Clone(st.Namespaces)
	for _, ns := range found {
		theirs := slices.ContainsFunc(otherPrefixes, func(p string) bool { return strings.HasPrefix(ns, p) })
		if !theirs && !slices.Contains(out, ns) {
			out = append(out, ns)
		}
	}
	// Only those that exist.
	return slices.DeleteFunc(out, func(ns string) bool {
		_, err := os.Stat(filepath.Join(netns.Dir, ns))
		return err != nil
	}), nil
}

// stopProcessesIn stops every process whose network namespace is ns,
// found by the namespace's identity (device and inode), not by name: a
// process left in it would keep the namespace alive after its name is
// gone.
func stopProcessesIn(ns string, opts Options) error {
	var want unix.Stat_t
	if err := unix.Stat(filepath.Join(netns.Dir, ns), &want); err != nil {
		return nil // gone already
	}
	for _, pid := range processesIn(want) {
		opts.progress("%s: stopping pid %d, still in it", ns, pid)
		stop(pid, pid, func() bool { return slices.Contains(processesIn(want), pid) })
	}
	return nil
}

// resetSockets aborts the TCP sockets that the namespace's processes left
// behind: closed with data in flight over links that go before them, they
// would keep the namespace, and a congestion control they use, for minutes
// after it is deleted. It only tells of a failure, which leaves them to
// time out as before.
func resetSockets(ns string, opts Options) {
	n, err := (&netns.NS{Name: ns}).ResetTCP()
	if n > 0 {
		opts.progress("%s: %d TCP sockets left by its processes reset", ns, n)
	}
	if err != nil {
		opts.progress("%s: %v; they end by their timeouts", ns, err)
	}
}

// processesIn lists the PIDs whose network namespace is the one ns
// describes.
func processesIn(ns unix.Stat_t) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		var st unix.Stat_t
		if unix.Stat(filepath.Join("/proc", e.Name(), "ns", "net"), &st) != nil {
			continue
		}
		if st.Dev == ns.Dev && st.Ino == ns.Ino && !zombie(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func zombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	i := strings.LastIndexByte(string(b), ')')
	return i < 0 || i+2 >= len(b) || b[i+2] == 'Z'
}

// stop sends SIGTERM to target (a PID, or a process group as -PGID),
// waits up to stopGrace for alive to turn false, then sends SIGKILL.
func stop(pid, target int, alive func() bool) {
	if pid <= 1 {
		return
	}
	unix.Kill(target, unix.SIGTERM) // ESRCH: gone already
	for deadline := time.Now().Add(stopGrace); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if !alive() {
			return
		}
	}
	unix.Kill(target, unix.SIGKILL)
	for deadline := time.Now().Add(time.Second); alive() && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
}

// deleteLink deletes an interface by name in its namespace (a veth's peer
// goes with it), so that it is gone when Down returns, not whenever the
// kernel gets to the namespace's teardown. A missing one is no error.
func deleteLink(l LinkEnd) error {
	if _, err := os.Stat(filepath.Join(netns.Dir, l.Namespace)); err != nil {
		return nil
	}
	h, err := handleAt(l.Namespace)
	if err != nil {
		return err
	}
	defer h.Close()
	link, err := h.LinkByName(l.Name)
	var notFound netlink.LinkNotFoundError
	if errors.As(err, &notFound) {
		return nil
	}
	if err == nil {
		err = h.LinkDel(link)
	}
	if err != nil && !errors.Is(err, unix.ENODEV) {
		return fmt.Errorf("delete link %s in %s: %w", l.Name, l.Namespace, err)
	}
	return nil
}
