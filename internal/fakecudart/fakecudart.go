// Package fakecudart builds the fake CUDA runtime of csrc/fakecudart for
// tests: a shared library exporting the CUDA runtime's symbols, backed by
// host memory, whose streams (the legacy default stream included) run
// copies, event records and event waits later, in order, from a thread.
// The header of fakecudart.c documents its semantics and environment.
package fakecudart

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

var (
	once  sync.Once
	built string
	err   error
)

// Source returns the path of fakecudart.c.
func Source() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "csrc", "fakecudart", "fakecudart.c")
}

// Path builds the library (once per source version, cached in the temp
// dir) and returns its path. It fails the test when the build fails.
func Path(t testing.TB) string {
	t.Helper()
	once.Do(func() { built, err = build() })
	if err != nil {
		t.Fatalf("fakecudart: %v", err)
	}
	return built
}

// Build builds the library as Path does, for programs outside tests, and
// returns its path or why it could not be built.
func Build() (string, error) {
	once.Do(func() { built, err = build() })
	return built, err
}

func build() (string, error) {
	src, err := os.ReadFile(Source())
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(src)
	out := filepath.Join(os.TempDir(), "tensorbatch-fakecudart-"+hex.EncodeToString(sum[:6])+".so")
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "cc"
	}
	tmp := fmt.Sprintf("%s.%d.tmp", out, os.Getpid())
	cmd := exec.Command(cc, "-std=c11", "-O1", "-g", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC", "-D_GNU_SOURCE", "-o", tmp, Source(), "-lpthread")
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("%s: %v\n%s", cmd, err, msg)
	}
	return out, os.Rename(tmp, out)
}
