package images

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
)

func TestParseLddKeepsTheLibrariesAndTheInterpreter(t *testing.T) {
	// ldd /usr/bin/prometheus (Debian bookworm's package) on this machine.
	out := "\tlinux-vdso.so.1 (0x00007fb13d7b1000)\n" +
		"\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007fb13d5ba000)\n" +
		"\t/lib64/ld-linux-x86-64.so.2 (0x00007fb13d7b3000)\n"
	files, err := parseLdd(out)
	require.NoError(t, err)
	want := []File{
		{Source: "/lib/x86_64-linux-gnu/libc.so.6", Path: "/lib/x86_64-linux-gnu/libc.so.6"},
		{Source: "/lib64/ld-linux-x86-64.so.2", Path: "/lib64/ld-linux-x86-64.so.2"},
	}
	if d := cmp.Diff(want, files); d != "" {
		t.Errorf("parseLdd (-want +got):\n%s", d)
	}
}

func TestParseLddRefusesAMissingLibrary(t *testing.T) {
	_, err := parseLdd("\tlibfoo.so.1 => not found\n\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x1)\n")
	require.ErrorContains(t, err, "library libfoo.so.1 not found")
}

// A real dynamic program of this machine gets its C library and loader, and
// a static Go binary gets nothing.
func TestLinkedFilesOfRealPrograms(t *testing.T) {
	ctx := context.Background()
	files, err := LinkedFiles(ctx, "/bin/sh")
	require.NoError(t, err)
	paths := map[string]bool{}
	for _, f := range files {
		_, err := os.Stat(f.Source)
		require.NoError(t, err, "ldd named %s", f.Source)
		paths[f.Path] = true
	}
	require.True(t, paths["/lib64/ld-linux-x86-64.so.2"], "no interpreter in %v", files)
	require.True(t, paths["/lib/x86_64-linux-gnu/libc.so.6"], "no libc in %v", files)

	static := t.TempDir() + "/pause"
	require.NoError(t, GoBinary(ctx, "../..", "./internal/realnode/pause", static))
	files, err = LinkedFiles(ctx, static)
	require.NoError(t, err)
	require.Empty(t, files)
}

// A second taker of the rootfs lock waits until the first lets go (and
// gives up when its context ends first).
func TestLockFileMakesTheSecondTakerWait(t *testing.T) {
	path := t.TempDir() + "/x.tar.lock"
	unlock, err := lockFile(context.Background(), path)
	require.NoError(t, err)

	short, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
	defer cancel()
	_, err = lockFile(short, path)
	require.ErrorIs(t, err, context.DeadlineExceeded)

	got := make(chan error, 1)
	go func() {
		u, err := lockFile(context.Background(), path)
		if err == nil {
			u()
		}
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("the second taker did not wait: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	unlock()
	require.NoError(t, <-got)
}
