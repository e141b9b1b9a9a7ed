package dataplane

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/amptcp/amptcp/internal/bpffs"
	"github.com/amptcp/amptcp/internal/buildinfo"
)

// The data plane outlives a restart of lispd by pinning (bpffs): the TCX
// links that keep the programs attached, the maps that hold the state
// (map-cache, subflow table, counters) and a manifest that says what
// they are, in a directory of their own. A new lispd loads its programs
// with the pinned maps that it can read (adopt.go) and swaps them into
// the links, one atomic update per interface: no packet meets an
// interface without a program.

// PinRoot is where the data planes of lispds are pinned unless
// dataplane.pin-path says otherwise: one directory per network
// namespace.
const PinRoot = "/sys/fs/bpf/amptcp"

// PinOff is the pin-path that turns pinning off.
const PinOff = "off"

// PinPath is the directory a data plane configured with pin-path is
// pinned in: pin-path itself, or, when it is empty, a directory under
// PinRoot named after the network namespace lispd runs in (its name in
// /run/netns, "host" for the first one, else its inode number), so that
// the lispds of the namespaces of one machine never share one. It is ""
// for "off".
func PinPath(configured string) (string, error) {
	switch configured {
	case PinOff:
		return "", nil
	case "":
	default:
		return configured, nil
	}
	name, err := netnsName()
	if err != nil {
		return "", fmt.Errorf("dataplane.pin-path: name the default after the network namespace: %w", err)
	}
	return filepath.Join(PinRoot, "lispd-"+name), nil
}

// netnsName names the network namespace of this process: its name
// under /run/netns (as `ip netns identify` finds it), "host" when it is
// the first process's, else "netns" and its inode number.
func netnsName() (string, error) {
	var self unix.Stat_t
	if err := unix.Stat("/proc/thread-self/ns/net", &self); err != nil {
		return "", err
	}
	if entries, err := os.ReadDir("/run/netns"); err == nil {
		for _, e := range entries {
			var st unix.Stat_t
			if unix.Stat(filepath.Join("/run/netns", e.Name()), &st) == nil && st.Dev == self.Dev && st.Ino == self.Ino {
				return strings.ReplaceAll(e.Name(), ".", "_"), nil // bpffs names have no dots
			}
		}
	}
	var first unix.Stat_t
	if unix.Stat("/proc/1/ns/net", &first) == nil && first.Dev == self.Dev && first.Ino == self.Ino {
		return "host", nil
	}
	return "netns" + strconv.FormatUint(self.Ino, 10), nil
}

// netnsCookie is the kernel's identifier of this process's network
// namespace, never reused while the machine runs (Linux 5.14): a
// manifest from another namespace of the same name is a stale one.
// 0 when the kernel does not tell.
func netnsCookie() uint64 {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0
	}
	defer unix.Close(fd)
	c, err := unix.GetsockoptUint64(fd, unix.SOL_SOCKET, unix.SO_NETNS_COOKIE)
	if err != nil {
		return 0
	}
	return c
}

// pinDir is the directory a data plane is pinned in, locked while this
// lispd uses it so that two lispds never share one.
type pinDir struct {
	path  string
	lock  int    // the locked directory's descriptor; -1 when not open
	netns uint64 // the cookie of the network namespace it was opened in
}

var errInUse = errors.New("in use by another lispd")

// openPinDir creates path on its BPF file system if need be and locks
// it.
func openPinDir(path string) (*pinDir, error) {
	if err := bpffs.Prepare(path); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(path, 0o700); err != nil {
		return nil, err
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		unix.Close(fd)
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%s is %w (give each lispd of a namespace a pin-path of its own)", path, errInUse)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return &pinDir{path: path, lock: fd, netns: netnsCookie()}, nil
}

// file is the path of a pinned object; bpffs names have no dots.
func (p *pinDir) file(name string) string {
	return filepath.Join(p.path, strings.ReplaceAll(strings.TrimPrefix(name, "."), ".", "_"))
}

// clear removes the pins of data planes in the directory (the objects
// this process holds stay): the manifest, the links and the maps that
// this lispd's programs or the manifest name. Anything else is left, in
// case pin-path names a directory that holds more.
func (p *pinDir) clear() error {
	entries, err := os.ReadDir(p.path)
	if err != nil {
		return err
	}
	ours := map[string]bool{manifestName: true}
	names := slices.Collect(maps.Keys(stateMaps()))
	if mf, err := p.readManifest(); err == nil {
		names = slices.AppendSeq(names, maps.Keys(mf.Maps))
	}
	for _, name := range names {
		ours[filepath.Base(p.file(name))] = true
	}
	var errs []error
	for _, e := range entries {
		if !ours[e.Name()] && !isLinkPin(e.Name()) {
			continue
		}
		if err := os.Remove(filepath.Join(p.path, e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// remove removes the data plane's pins and the directory, unless it
// holds more, and unlocks it.
func (p *pinDir) remove() error {
	err := p.clear()
	if err == nil {
		if err = os.Remove(p.path); errors.Is(err, unix.ENOTEMPTY) || errors.Is(err, unix.EBUSY) {
			err = nil // not only ours, or a mount point
		}
	}
	p.unlock()
	return err
}

func (p *pinDir) unlock() {
	if p.lock >= 0 {
		unix.Close(p.lock)
		p.lock = -1
	}
}

// RemovePinned removes the data plane a lispd left pinned in dir (a
// PinPath), detaching its programs, and the GRO device it left in the
// calling thread's network namespace: the cleanup after a lispd that left
// them for a restart that is not coming. It reports whether there was a
// data plane.
func RemovePinned(dir string) (bool, error) {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	p, err := openPinDir(dir)
	if err != nil {
		return false, err
	}
	return true, errors.Join(p.remove(), removeGRO())
}

// manifest says what a pin directory holds: which lispd pinned it and
// when, in which network namespace, the layout of each map (layoutOf)
// and the names of the counters, in the order of their indexes.
type manifest struct {
	Format   int               `json:"format"`
	Lispd    string            `json:"lispd"`
	Pinned   time.Time         `json:"pinned"`
	Netns    uint64            `json:"netns_cookie"`
	Maps     map[string]string `json:"maps"`
	Counters []string          `json:"counters"`
}

const (
	manifestFormat = 1
	manifestName   = "manifest"
	manifestSize   = 8192 // bytes of JSON, at most
)

// newManifest is the manifest of this lispd's maps of the layouts given.
func (p *pinDir) newManifest(layouts map[string]string) manifest {
	return manifest{Format: manifestFormat, Lispd: buildinfo.Version, Pinned: time.Now().UTC(),
		Netns: p.netns, Maps: layouts, Counters: counterNames}
}

// writeManifest pins mf, in an array map of one element that holds its
// JSON: a BPF file system holds no plain files.
func (p *pinDir) writeManifest(mf manifest) error {
	b, err := json.Marshal(mf)
	if err != nil {
		return err
	}
	if len(b) > manifestSize {
		return fmt.Errorf("manifest of %d bytes: at most %d fit", len(b), manifestSize)
	}
	m, err := ebpf.NewMap(&ebpf.MapSpec{Name: "amptcp_manifest", Type: ebpf.Array, KeySize: 4, ValueSize: manifestSize, MaxEntries: 1})
	if err != nil {
		return fmt.Errorf("manifest: %w", err)
	}
	defer m.Close()
	v := make([]byte, manifestSize)
	copy(v, b)
	if err := m.Update(uint32(0), v, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("manifest: %w", err)
	}
	os.Remove(p.file(manifestName))
	return m.Pin(p.file(manifestName))
}

// readManifest reads the manifest of the directory; a directory without
// one holds no data plane this lispd can adopt.
func (p *pinDir) readManifest() (*manifest, error) {
	m, err := ebpf.LoadPinnedMap(p.file(manifestName), nil)
	if err != nil {
		return nil, err
	}
	defer m.Close()
	if m.Type() != ebpf.Array || m.KeySize() != 4 || m.ValueSize() > 1<<20 {
		return nil, errors.New("the manifest is not what lispd writes")
	}
	v := make([]byte, m.ValueSize())
	if err := m.Lookup(uint32(0), &v); err != nil {
		return nil, fmt.Errorf("read the manifest: %w", err)
	}
	var mf manifest
	if err := json.Unmarshal(bytes.TrimRight(v, "\x00"), &mf); err != nil {
		return nil, fmt.Errorf("the manifest does not decode: %w", err)
	}
	if mf.Format != manifestFormat {
		return nil, fmt.Errorf("the manifest is of format %d, this lispd reads %d", mf.Format, manifestFormat)
	}
	return &mf, nil
}
