package main

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// A real Ctrl-C (SIGINT) stops the command cleanly: corpus build, reading
// standard input that never ends, exits 1 saying it was interrupted and
// leaves no file. The signal is sent once the command has read its first
// line (TIOCINQ says the pipe is empty), so it is not the Go runtime's default at start.
func TestInterruptBySignal(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the command and signals it ")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "tensorbatch")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "%s", out)
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer w.Close()
	cmd := exec.Command(bin, "corpus", "build", "--tokenizer", "r50k_base", "--out", filepath.Join(dir, "c"), "-")
	cmd.Stdin = r
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	r.Close()
	_, err = io.WriteString(w, `{"text": "hello"}`+"\n")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		n, err := unix.IoctlGetInt(int(w.Fd()), unix.TIOCINQ)
		return err == nil && n == 0
	}, 10*time.Second, 5*time.Millisecond, "the command reads its input")
	require.NoError(t, cmd.Process.Signal(os.Interrupt))
	err = cmd.Wait()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, stderr.String())
	assert.Equal(t, 1, ee.ExitCode(), "%v: %s", ee, stderr.String())
	assert.Contains(t, stderr.String(), "interrupted")
	left, err := filepath.Glob(filepath.Join(dir, "c*"))
	require.NoError(t, err)
	assert.Empty(t, left)
}
