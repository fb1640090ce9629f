package realnode

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// hostPaths are the places outside the workdir that the node's parts write
// to whatever their configuration says: libcni's result cache, containerd's
// shim sockets, the pinned network namespaces, the kubelet's device-plugin
// socket, kube-controller-manager's default FlexVolume directory and the
// kubelet's container-log links.
var hostPaths = []string{
	"/var/lib/cni",
	cniCacheDir,
	"/run/containerd",
	"/run/containerd/s",
	netnsDir,
	"/var/lib/kubelet",
	"/var/lib/kubelet/device-plugins",
	"/usr/libexec/kubernetes",
	"/usr/libexec/kubernetes/kubelet-plugins",
	"/usr/libexec/kubernetes/kubelet-plugins/volume",
	"/usr/libexec/kubernetes/kubelet-plugins/volume/exec",
	containerLogLinks,
}

// hostSnapshot records which host paths existed, and what was in them,
// before the node started.
type hostSnapshot struct {
	// Existed are the hostPaths that existed.
	Existed map[string]bool `json:"existed"`
	// Entries are the names in each existing hostPath.
	Entries map[string][]string `json:"entries"`
}

func snapshotHost() hostSnapshot {
	s := hostSnapshot{Existed: map[string]bool{}, Entries: map[string][]string{}}
	for _, p := range hostPaths {
		entries, err := os.ReadDir(p)
		if err != nil {
			continue
		}
		s.Existed[p] = true
		for _, e := range entries {
			s.Entries[p] = append(s.Entries[p], e.Name())
		}
	}
	return s
}

// newHostEntries lists what is in the host paths now and was not before:
// files and directories the node left. Network namespaces are left to
// removeNetns (they are mounts).
func (s hostSnapshot) newHostEntries() (files []string, dirs []string) {
	for _, p := range hostPaths {
		before := map[string]bool{}
		for _, e := range s.Entries[p] {
			before[e] = true
		}
		entries, err := os.ReadDir(p)
		if err != nil {
			continue
		}
		if !s.Existed[p] {
			dirs = append(dirs, p)
		}
		if p == netnsDir {
			continue
		}
		for _, e := range entries {
			full := filepath.Join(p, e.Name())
			if before[e.Name()] || e.IsDir() {
				// Directories are hostPaths of their own or not ours.
				continue
			}
			files = append(files, full)
		}
	}
	return files, dirs
}

// cleanHost removes the files the node left in the host paths and the host
// directories it created, when they are empty (deepest first). Files in a
// host directory that existed before are removed only when they are new.
func (s hostSnapshot) cleanHost() error {
	files, dirs := s.newHostEntries()
	var errs []error
	for _, f := range files {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
	for _, d := range dirs {
		if err := os.Remove(d); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("removing %s: %w", d, err))
		}
	}
	return errors.Join(errs...)
}

// describe lists leftovers for Leftovers.
func (s hostSnapshot) describe() []string {
	files, dirs := s.newHostEntries()
	var left []string
	if len(files) > 0 {
		left = append(left, "files: "+strings.Join(files, ", "))
	}
	if len(dirs) > 0 {
		left = append(left, "directories: "+strings.Join(dirs, ", "))
	}
	return left
}
