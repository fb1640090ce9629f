// Package doctor checks a machine before the first `make run` or `make test`
// and says what is missing and how to get it. `make doctor` prints the whole
// report; `make run` runs it first and stops when something the run needs is
// missing.
package doctor

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Purpose is what the machine is checked for.
type Purpose string

const (
	// ForTest: `make test` (envtest suites and the real-launcher tests).
	ForTest Purpose = "test"
	// ForRun: `make run`, `make e2e` (the local kwok cluster).
	ForRun Purpose = "run"
	// ForRealNode: `make run NODE=real`, `make e2e-real` (kubelet, containerd).
	ForRealNode Purpose = "real"
)

// Check is one finding.
type Check struct {
	Name string
	// OK is false when the thing is missing or too small.
	OK bool
	// Have says what was found.
	Have string
	// Fix says how to get it.
	Fix string
	// Needed by these purposes: the run stops without it. Elsewhere it is
	// only reported.
	Needed []Purpose
	// Note is what a missing item costs when it is not needed.
	Note string
}

func (c Check) neededFor(p Purpose) bool {
	for _, n := range c.Needed {
		if n == p {
			return true
		}
	}
	return false
}

// Machine is what the checks read; tests give their own.
type Machine struct {
	// GoVersion is runtime.Version() of the go command on PATH ("go1.26.8").
	GoVersion string
	// FreeBytes is the free disk space where the repository lives.
	FreeBytes uint64
	// Exists says whether a file exists.
	Exists func(path string) bool
	// LookPath finds a command on PATH.
	LookPath func(name string) (string, error)
	// ReadFile reads /proc files.
	ReadFile func(path string) ([]byte, error)
	// UID is the effective user id.
	UID int
}

// Real reads this machine, for the repository at root.
func Real(root string) Machine {
	m := Machine{
		GoVersion: goVersion(),
		Exists: func(p string) bool {
			_, err := os.Stat(p)
			return err == nil
		},
		LookPath: exec.LookPath,
		ReadFile: os.ReadFile,
		UID:      os.Geteuid(),
	}
	var st syscall.Statfs_t
	if syscall.Statfs(root, &st) == nil {
		m.FreeBytes = st.Bavail * uint64(st.Bsize)
	}
	return m
}

// goVersion asks the go command on PATH (the one make uses), not the one
// that built this program.
func goVersion() string {
	out, err := exec.Command("go", "env", "GOVERSION").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

const gib = 1 << 30

// Checks runs every check. minGo is go.mod's go directive ("1.26.0").
func Checks(m Machine, minGo string) []Check {
	var out []Check
	goOK := m.GoVersion != "" && versionAtLeast(strings.TrimPrefix(m.GoVersion, "go"), minGo)
	out = append(out, Check{Name: "Go " + minGo + " or newer", OK: goOK, Have: orNone(m.GoVersion),
		Fix: "install Go " + minGo + "+ and put it first on PATH", Needed: []Purpose{ForTest, ForRun, ForRealNode}})

	free := float64(m.FreeBytes) / gib
	out = append(out, Check{Name: "free disk for bin/ and the Go caches (4 GiB)", OK: m.FreeBytes >= 4*gib,
		Have: fmt.Sprintf("%.1f GiB free", free), Fix: "free disk space where the repository and ~/.cache/go-build live",
		Needed: []Purpose{ForTest, ForRun, ForRealNode}})
	out = append(out, Check{Name: "free disk for the real node's images and root filesystems (15 GiB)", OK: m.FreeBytes >= 15*gib,
		Have: fmt.Sprintf("%.1f GiB free", free), Fix: "free disk space; the trainer image alone is a 1.4 GB Debian root filesystem",
		Needed: []Purpose{ForRealNode}, Note: "only the real node (make run NODE=real, make e2e-real) needs it"})

	for _, cmd := range []string{"git", "make", "gcc"} {
		_, err := m.LookPath(cmd)
		out = append(out, Check{Name: "command " + cmd, OK: err == nil, Have: found(err), Fix: "apt-get install " + debianPackage(cmd),
			Needed: []Purpose{ForTest, ForRun, ForRealNode}})
	}

	torch := m.Exists("/usr/bin/torchrun") && m.Exists("/usr/lib/python3/dist-packages/prometheus_client")
	out = append(out, Check{Name: "python3-torch and python3-prometheus-client (Debian's)", OK: torch,
		Have: found(boolErr(torch)), Fix: "apt-get install python3-torch python3-prometheus-client",
		Note: "without them make test skips the real-launcher tests (test/torch/launcher, test/torch/trainer) and lists them at the end"})

	// The real node.
	out = append(out, Check{Name: "root (the real node makes network namespaces, mounts and routes)", OK: m.UID == 0,
		Have: fmt.Sprintf("uid %d", m.UID), Fix: "run as root", Needed: []Purpose{ForRealNode}})
	for _, c := range []struct{ name, path, pkg string }{
		{"containerd", "/usr/bin/containerd", "containerd"},
		{"runc", "/usr/sbin/runc", "runc"},
		{"CNI plugins (bridge, host-local, portmap, loopback)", "/usr/lib/cni/bridge", "containernetworking-plugins"},
		{"iptables", "/usr/sbin/iptables", "iptables"},
		{"conntrack", "/usr/sbin/conntrack", "conntrack"},
		{"mmdebstrap (builds the trainer image's root filesystem)", "/usr/bin/mmdebstrap", "mmdebstrap"},
		{"ip (iproute2)", "/usr/sbin/ip", "iproute2"},
	} {
		ok := m.Exists(c.path) || (c.name == "runc" && m.Exists("/usr/bin/runc"))
		out = append(out, Check{Name: c.name, OK: ok, Have: found(boolErr(ok)), Fix: "apt-get install " + c.pkg,
			Needed: []Purpose{ForRealNode}})
	}
	fs, _ := m.ReadFile("/proc/filesystems")
	out = append(out, Check{Name: "overlay filesystem (containerd's snapshotter)", OK: strings.Contains(string(fs), "overlay"),
		Have: found(boolErr(strings.Contains(string(fs), "overlay"))), Fix: "modprobe overlay", Needed: []Purpose{ForRealNode}})
	cg := cgroupMode(m)
	out = append(out, Check{Name: "cgroups (v1, hybrid or v2)", OK: cg != "", Have: orNone(cg),
		Fix: "mount cgroups (the kubelet runs with cgroupDriver cgroupfs; v1 with failCgroupV1: false)", Needed: []Purpose{ForRealNode}})
	return out
}

// cgroupMode tells v2, hybrid or v1 from /proc/mounts.
func cgroupMode(m Machine) string {
	mounts, err := m.ReadFile("/proc/mounts")
	if err != nil {
		return ""
	}
	v1, v2 := false, false
	sc := bufio.NewScanner(strings.NewReader(string(mounts)))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 3 {
			continue
		}
		switch f[2] {
		case "cgroup":
			v1 = true
		case "cgroup2":
			v2 = true
		}
	}
	switch {
	case v1 && v2:
		return "hybrid (v1 controllers, a v2 unified mount)"
	case v1:
		return "v1"
	case v2:
		return "v2"
	}
	return ""
}

// Report prints the checks for purpose p and says whether p can go ahead.
func Report(w io.Writer, checks []Check, p Purpose) bool {
	ok := true
	fmt.Fprintf(w, "Checking this machine for `%s`:\n", describe(p))
	for _, c := range checks {
		mark := "ok     "
		switch {
		case c.OK:
		case c.neededFor(p):
			mark, ok = "MISSING", false
		default:
			mark = "absent "
		}
		fmt.Fprintf(w, "  %s %s: %s", mark, c.Name, c.Have)
		if !c.OK {
			fmt.Fprintf(w, " -> %s", c.Fix)
			if !c.neededFor(p) && c.Note != "" {
				fmt.Fprintf(w, " (%s)", c.Note)
			}
		}
		fmt.Fprintln(w)
	}
	if ok {
		fmt.Fprintf(w, "Nothing `%s` needs is missing.\n", describe(p))
	} else {
		fmt.Fprintf(w, "`%s` cannot run until what is MISSING above is there.\n", describe(p))
	}
	return ok
}

func describe(p Purpose) string {
	switch p {
	case ForTest:
		return "make test"
	case ForRealNode:
		return "make run NODE=real"
	}
	return "make run"
}

// MinGoVersion reads the go directive of the go.mod at root.
func MinGoVersion(root string) (string, error) {
	raw, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "go "); ok {
			return strings.TrimSpace(v), nil
		}
	}
	return "", fmt.Errorf("no go directive in %s/go.mod", root)
}

// versionAtLeast compares dotted versions ("1.26.8" >= "1.26.0").
func versionAtLeast(have, want string) bool {
	h, w := strings.Split(have, "."), strings.Split(want, ".")
	for i := 0; i < len(w); i++ {
		var hv int
		if i < len(h) {
			// "1.27rc1" counts as 1.27.
			digits := h[i]
			if j := strings.IndexFunc(digits, func(r rune) bool { return r < '0' || r > '9' }); j >= 0 {
				digits = digits[:j]
			}
			hv, _ = strconv.Atoi(digits)
		}
		wv, _ := strconv.Atoi(w[i])
		if hv != wv {
			return hv > wv
		}
	}
	return true
}

func orNone(s string) string {
	if s == "" {
		return "none found"
	}
	return s
}

func found(err error) string {
	if err != nil {
		return "not found"
	}
	return "found"
}

type missing struct{}

func (missing) Error() string { return "missing" }

func boolErr(ok bool) error {
	if ok {
		return nil
	}
	return missing{}
}

func debianPackage(cmd string) string {
	if cmd == "gcc" {
		return "gcc"
	}
	return cmd
}
