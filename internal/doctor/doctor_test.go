package doctor

import (
	"bytes"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// bare is a machine with Go and plenty of disk, and nothing else.
func bare() Machine {
	return Machine{
		GoVersion: "go1.26.8",
		FreeBytes: 100 * gib,
		Exists:    func(string) bool { return false },
		LookPath:  func(n string) (string, error) { return "/usr/bin/" + n, nil },
		ReadFile:  func(string) ([]byte, error) { return nil, errors.New("no /proc here") },
		UID:       1000,
	}
}

func TestKwokRunNeedsOnlyGoAndDisk(t *testing.T) {
	var out bytes.Buffer
	assert.True(t, Report(&out, Checks(bare(), "1.26.0"), ForRun), out.String())
	assert.Contains(t, out.String(), "absent  python3-torch and python3-prometheus-client (Debian's): not found -> apt-get install python3-torch python3-prometheus-client")
	assert.Contains(t, out.String(), "absent  containerd: not found -> apt-get install containerd", "the real node's parts are reported, not required")
}

func TestOldGoOrFullDiskStopsEveryRun(t *testing.T) {
	m := bare()
	m.GoVersion = "go1.25.3"
	var out bytes.Buffer
	assert.False(t, Report(&out, Checks(m, "1.26.0"), ForTest))
	assert.Contains(t, out.String(), "MISSING Go 1.26.0 or newer: go1.25.3 -> install Go 1.26.0+")

	m = bare()
	m.FreeBytes = 2 * gib
	out.Reset()
	assert.False(t, Report(&out, Checks(m, "1.26.0"), ForRun))
	assert.Contains(t, out.String(), "MISSING free disk for bin/ and the Go caches (4 GiB): 2.0 GiB free")
}

func TestRealNodeNeedsRootPackagesAndKernelFeatures(t *testing.T) {
	var out bytes.Buffer
	assert.False(t, Report(&out, Checks(bare(), "1.26.0"), ForRealNode))
	for _, want := range []string{
		"MISSING root", "MISSING containerd: not found -> apt-get install containerd",
		"MISSING runc", "MISSING CNI plugins", "MISSING mmdebstrap", "MISSING overlay filesystem", "MISSING cgroups",
	} {
		assert.Contains(t, out.String(), want)
	}

	m := bare()
	m.UID = 0
	m.Exists = func(string) bool { return true }
	m.ReadFile = func(p string) ([]byte, error) {
		switch p {
		case "/proc/filesystems":
			return []byte("nodev\ttmpfs\nnodev\toverlay\n"), nil
		case "/proc/mounts":
			return []byte("cgroup2 /sys/fs/cgroup/unified cgroup2 rw 0 0\ncgroup /sys/fs/cgroup/cpu cgroup rw,cpu 0 0\n"), nil
		}
		return nil, errors.New("unexpected " + p)
	}
	out.Reset()
	require.True(t, Report(&out, Checks(m, "1.26.0"), ForRealNode), out.String())
	assert.Contains(t, out.String(), "ok      cgroups (v1, hybrid or v2): hybrid")
}

func TestVersionAtLeast(t *testing.T) {
	for _, c := range []struct {
		have, want string
		ok         bool
	}{
		{"1.26.8", "1.26.0", true}, {"1.26", "1.26.0", true}, {"1.27rc1", "1.26.0", true},
		{"1.25.9", "1.26.0", false}, {"2.0.0", "1.26.0", true}, {"1.3.0", "1.26.0", false},
	} {
		assert.Equal(t, c.ok, versionAtLeast(c.have, c.want), "%s >= %s", c.have, c.want)
	}
}
