package images

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

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
