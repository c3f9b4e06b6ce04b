package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// need skips the test for what is missing, or fails it under $CI.
func need(t *testing.T, missing string) {
	t.Helper()
	msg := missing + " (scripts/install-deps.sh installs it)"
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// npmDir returns the folder whose node_modules holds the npm packages
// (scripts/install-deps.sh puts them in .cache/npm of the repository),
// or skips the test, unless $CI is set: then it fails.
func npmDir(t *testing.T, packages ...string) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", ".cache", "npm"))
	require.NoError(t, err)
	if _, err := exec.LookPath("node"); err != nil {
		need(t, "node is not on PATH")
	}
	for _, p := range packages {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", p, "package.json")); err != nil {
			need(t, p+" is not in "+dir)
		}
	}
	return dir
}

// tb runs the command with args and returns its exit status, standard
// output and standard error.
func tb(t *testing.T, ctx context.Context, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(ctx, args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// python runs a Python script with Debian's python3, skipping (or, in CI,
// failing) where it is missing.
func python(t *testing.T, script string, args ...string) string {
	t.Helper()
	py := "/usr/bin/python3"
	if _, err := os.Stat(py); err != nil {
		need(t, py+" is missing")
	}
	out, err := exec.Command(py, append([]string{"-c", script}, args...)...).CombinedOutput()
	require.NoError(t, err, "%s", out)
	return string(out)
}
