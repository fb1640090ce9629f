package realnode

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// Host paths the node's parts use that cannot be moved into the workdir.
const (
	// netnsDir is where containerd 1.6 pins pod network namespaces.
	netnsDir = "/var/run/netns"
	// cniCacheDir is libcni's result cache (files named <network>-<id>-<if>).
	cniCacheDir = "/var/lib/cni/results"
	// containerLogLinks is where the kubelet links container logs.
	containerLogLinks = "/var/log/containers"
	// kubepodsCgroup is the kubelet's cgroup (cgroupfs driver) in every
	// hierarchy.
	kubepodsCgroup = "kubepods"
	// cgroupRoot holds the cgroup v1 hierarchies and the unified one.
	cgroupRoot = "/sys/fs/cgroup"
)

// mountsUnder lists the mount points at or below dir, deepest first.
func mountsUnder(dir string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var mounts []string
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMount(fields[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			mounts = append(mounts, mp)
		}
	}
	sort.Slice(mounts, func(i, j int) bool { return len(mounts[i]) > len(mounts[j]) })
	return mounts, s.Err()
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var v int
			if _, err := fmt.Sscanf(s[i+1:i+4], "%o", &v); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// unmountAll detaches every mount under dir (container root filesystems,
// shm, the kubelet's secret and projected volumes), deepest first.
func unmountAll(dir string) error {
	mounts, err := mountsUnder(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, m := range mounts {
		if err := unix.Unmount(m, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("unmounting %s: %w", m, err))
		}
	}
	return errors.Join(errs...)
}

// removeWorkdir deletes dir, but only when nothing is mounted below it any
// more: a bind mount left in a container's root filesystem would make
// RemoveAll delete the files of the host directory it shows.
func removeWorkdir(dir string) error { return removeUnlessMounted(dir, mountsUnder) }

func removeUnlessMounted(dir string, mountsUnder func(string) ([]string, error)) error {
	mounts, err := mountsUnder(dir)
	if err != nil {
		return err
	}
	if len(mounts) > 0 {
		return fmt.Errorf("not removing %s: still mounted below it: %s", dir, strings.Join(mounts, ", "))
	}
	return os.RemoveAll(dir)
}

// netnsNames lists the network namespaces pinned in netnsDir.
func netnsNames() map[string]bool {
	names := map[string]bool{}
	entries, _ := os.ReadDir(netnsDir)
	for _, e := range entries {
		names[e.Name()] = true
	}
	return names
}

// removeNetns unpins and deletes the cni-* namespaces not in before (those
// the node's containerd made and did not get to remove).
func removeNetns(before map[string]bool) error {
	var errs []error
	for name := range netnsNames() {
		if before[name] || !strings.HasPrefix(name, "cni-") {
			continue
		}
		p := filepath.Join(netnsDir, name)
		if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("unmounting %s: %w", p, err))
			continue
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// removeHostFiles deletes the files the node's parts leave outside the
// workdir: libcni's cached results for the node's network and the
// kubelet's links to container logs in the workdir.
func removeHostFiles(workdir string) {
	results, _ := filepath.Glob(filepath.Join(cniCacheDir, CNINetwork+"-*"))
	for _, f := range results {
		_ = os.Remove(f)
	}
	links, _ := filepath.Glob(filepath.Join(containerLogLinks, "*.log"))
	for _, l := range links {
		if target, err := os.Readlink(l); err == nil && strings.HasPrefix(target, workdir+"/") {
			_ = os.Remove(l)
		}
	}
}

// removeKubepodsCgroups removes the kubelet's cgroup trees (children
// first) in every hierarchy. Each cgroup is empty by then: every container
// was killed first.
func removeKubepodsCgroups() error {
	hierarchies, _ := filepath.Glob(filepath.Join(cgroupRoot, "*"))
	var errs []error
	for _, h := range hierarchies {
		root := filepath.Join(h, kubepodsCgroup)
		if _, err := os.Stat(root); err != nil {
			continue
		}
		var dirs []string
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
		for _, d := range dirs {
			if err := unix.Rmdir(d); err != nil && !errors.Is(err, unix.ENOENT) {
				errs = append(errs, fmt.Errorf("removing cgroup %s: %w", d, err))
			}
		}
	}
	return errors.Join(errs...)
}

// sweep removes everything a node running in workdir can have left on the
// machine, whether its run stopped cleanly or was killed: processes
// (recorded ones, containerd shims of its socket, containers under its
// runc root), mounts, network namespaces, cgroups, host files, iptables
// chains, the bridge, the route, the node address and the sysctls. It is
// safe to run when there is nothing to remove.
func sweep(ctx context.Context, workdir string, netnsBefore map[string]bool) error {
	var errs []error
	killRecorded(workdir)
	socket := filepath.Join(workdir, "containerd", "containerd.sock")
	killContainers(ctx, filepath.Join(workdir, "containerd", "runc"))
	killMatching(socket)
	errs = append(errs, unmountAll(workdir))
	errs = append(errs, removeNetns(netnsBefore))
	removeHostFiles(workdir)
	errs = append(errs, removeKubepodsCgroups())
	errs = append(errs, tearDownNetwork(ctx))
	errs = append(errs, restoreTunables(filepath.Join(workdir, "tunables.json")))
	var host hostSnapshot
	if readJSON(filepath.Join(workdir, "host-before.json"), &host) == nil {
		errs = append(errs, host.cleanHost())
	}
	return errors.Join(errs...)
}

// PruneToLogs removes everything in a torn-down node's workdir except the
// process logs and the pod logs, which tell what happened. A failed suite
// keeps only those: the rest (containerd's image store, etcd) is gigabytes
// per run.
func PruneToLogs(dir string) error { return pruneToLogs(dir, mountsUnder) }

func pruneToLogs(dir string, mountsUnder func(string) ([]string, error)) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		if e.Name() == "logs" || e.Name() == "pod-logs" {
			continue
		}
		if err := removeUnlessMounted(filepath.Join(dir, e.Name()), mountsUnder); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
