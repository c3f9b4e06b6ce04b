//go:build linux

package pinned_test

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/tensorbatch/tensorbatch/pinned"
)

func TestMlockRefusedIsOneNote(t *testing.T) {
	if os.Getenv("TB_MLOCK_CHILD") == "1" {
		var lim unix.Rlimit
		require.NoError(t, unix.Getrlimit(unix.RLIMIT_MEMLOCK, &lim))
		require.Less(t, lim.Cur, uint64(16<<20), "the child must run under a small RLIMIT_MEMLOCK")
		var cpu pinned.CPU
		for range 3 {
			b, err := cpu.HostAlloc(16 << 20)
			require.NoError(t, err, "a refused mlock is not fatal")
			b[len(b)-1] = 1
			require.NoError(t, cpu.HostFree(b))
		}
		return
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil || os.Getuid() != 0 {
		t.Skip("needs root and setpriv (util-linux) to run a child as nobody")
	}
	if err := exec.Command(os.Args[0], "-test.run=^$").Run(); err != nil {
		t.Skipf("this test binary cannot start itself as a child (%v): emulated without binfmt_misc?", err)
	}
	dir, err := os.MkdirTemp("", "tbmlock")
	require.NoError(t, err)
	defer os.RemoveAll(dir)
	require.NoError(t, os.Chmod(dir, 0o755))
	exe, err := os.ReadFile(os.Args[0])
	require.NoError(t, err)
	bin := dir + "/pinned.test"
	require.NoError(t, os.WriteFile(bin, exe, 0o755))
	cmd := exec.Command(setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", "--",
		bin, "-test.run=^TestMlockRefusedIsOneNote$", "-test.count=1")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "TB_MLOCK_CHILD=1", "GOCACHE=/nonexistent", "TMPDIR="+dir)
	var stderr, stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// A root shell may have raised the limit; the child gets the default.
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	require.NoError(t, withMemlock(8<<20, cmd.Run), "child: %s\n%s", stdout.String(), stderr.String())
	notes := strings.Count(stderr.String(), "host buffers are not page-locked")
	assert.Equal(t, 1, notes, "stderr: %s", stderr.String())
}

// withMemlock runs f with RLIMIT_MEMLOCK's soft limit at n, restoring it.
func withMemlock(n uint64, f func() error) error {
	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &old); err != nil {
		return err
	}
	lim := old
	lim.Cur = min(n, old.Max)
	if err := unix.Setrlimit(unix.RLIMIT_MEMLOCK, &lim); err != nil {
		return err
	}
	defer unix.Setrlimit(unix.RLIMIT_MEMLOCK, &old)
	return f()
}
