package doctor_test

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/amptcp/amptcp/internal/doctor"
	"github.com/amptcp/amptcp/internal/netns"
	"github.com/amptcp/amptcp/internal/testenv"
)

// TestThisKernel: on the project's kernel (Linux 6.18, as root) every
// required check passes with the real probes, which make their devices
// in namespaces of their own, never in the caller's.
func TestThisKernel(t *testing.T) {
	testenv.RequireRoot(t)
	r := doctor.Run(doctor.Host(), doctor.Everything())
	var out bytes.Buffer
	doctor.WriteText(&out, r)
	t.Logf("amptcp doctor:\n%s", out.String())
	for _, c := range r.Checks {
		if c.Required && c.Status != doctor.OK {
			t.Errorf("%s: %s %q (fix: %s)", c.Name, c.Status, c.Found, c.Fix)
		}
	}
	uname, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil || r.Kernel != strings.TrimSpace(string(uname)) {
		t.Errorf("kernel %q, /proc says %q (%v)", r.Kernel, uname, err)
	}
	if left, err := netns.Links("doctor"); err != nil || len(left) > 0 {
		t.Errorf("devices left in this namespace: %v (%v)", left, err)
	}
}
