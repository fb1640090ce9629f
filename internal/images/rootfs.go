package images

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

// Rootfs describes a Debian root filesystem made by mmdebstrap from the
// machine's own apt sources (no mirror is named: mmdebstrap then uses
// them).
type Rootfs struct {
	// Suite is the Debian release, e.g. bookworm.
	Suite string
	// Variant is mmdebstrap's --variant (apt: essential packages and apt).
	Variant string
	// Packages are installed on top (--include).
	Packages []string
}

// Key is a digest of the rootfs's inputs.
func (r Rootfs) Key() string {
	pkgs := append([]string(nil), r.Packages...)
	sort.Strings(pkgs)
	sum := sha256.Sum256([]byte(r.Suite + "\x00" + r.Variant + "\x00" + strings.Join(pkgs, ",")))
	return hex.EncodeToString(sum[:])
}

// Tarball returns the path of the rootfs tarball in the cache, running
// mmdebstrap first when no tarball with the same inputs is cached (about
// five minutes for python3-torch, 1.35 GB). Callers in several processes
// (make trainer-rootfs ahead of the suite, tests side by side) take turns
// on a lock file beside the tarball: the second waits for the first's
// tarball instead of making its own.
func (c Cache) Tarball(ctx context.Context, r Rootfs) (string, error) {
	out := filepath.Join(c.Dir, "rootfs", r.Key()+".tar")
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return "", err
	}
	unlock, err := lockFile(ctx, out+".lock")
	if err != nil {
		return "", err
	}
	defer unlock()
	if _, err := os.Stat(out); err == nil {
		return out, nil // made while this waited
	}
	tmp := out + ".tmp"
	_ = os.Remove(tmp)
	args := []string{"--variant=" + r.Variant, "--format=tar"}
	if len(r.Packages) > 0 {
		args = append(args, "--include="+strings.Join(r.Packages, ","))
	}
	args = append(args, r.Suite, tmp)
	cmd := exec.CommandContext(ctx, "mmdebstrap", args...)
	if b, err := cmd.CombinedOutput(); err != nil {
		_ = os.Remove(tmp)
		tail := string(b)
		if len(tail) > 4000 {
			tail = tail[len(tail)-4000:]
		}
		return "", fmt.Errorf("mmdebstrap %s: %w: %s", strings.Join(args, " "), err, tail)
	}
	return out, os.Rename(tmp, out)
}

// lockFile takes an exclusive flock on path (created if missing), polling
// so that ctx can end the wait, and returns its release.
func lockFile(ctx context.Context, path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
		}
		if err != syscall.EWOULDBLOCK {
			f.Close()
			return nil, fmt.Errorf("locking %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("waiting for %s: %w", path, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}
