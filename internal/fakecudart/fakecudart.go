// Package fakecudart builds the fake CUDA runtime of
// internal/csrc/fakecudart for tests: a shared library exporting the CUDA
// runtime's symbols, backed by host memory, whose streams (the legacy
// default stream included) run copies, event records and event waits
// later, in order, from a thread.
// The header of fakecudart.c documents its semantics and environment.
//
// It is built with the host's C compiler for linux. Elsewhere, and for a
// cross-built test binary (arm64 under qemu, Windows under wine), $TB_FAKE_CUDART
// names a library built for the target (make test-platforms builds them);
// without it, and in a binary built without cgo, the tests that need the
// fake skip and say why.
package fakecudart

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/tensorbatch/tensorbatch/internal/csrc"
)

// EnvLib names a prebuilt fake library to use instead of building one.
const EnvLib = "TB_FAKE_CUDART"

// errSkip marks the reasons the fake cannot exist in this binary.
var errSkip = errors.New("the fake CUDA runtime cannot be loaded")

var (
	once  sync.Once
	built string
	err   error
)

// Source returns the path of fakecudart.c.
func Source() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "csrc", "fakecudart", "fakecudart.c")
}

// Path builds the library (once per source version, cached in the temp
// dir) and returns its path. It skips the test where no fake can load
// (see the package doc) and fails it when the build fails.
func Path(t testing.TB) string {
	t.Helper()
	once.Do(func() { built, err = build() })
	if errors.Is(err, errSkip) {
		t.Skipf("fakecudart: %v", err)
	}
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
	switch {
	case !csrc.Cgo:
		return "", fmt.Errorf("%w: built without cgo", errSkip)
	case os.Getenv(EnvLib) != "":
		return os.Getenv(EnvLib), nil
	case runtime.GOOS != "linux":
		return "", fmt.Errorf("%w: it is built here for linux only; set %s to one built for %s/%s (make test-platforms does)",
			errSkip, EnvLib, runtime.GOOS, runtime.GOARCH)
	}
	src, err := os.ReadFile(Source())
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(src)
	out := filepath.Join(os.TempDir(), "tensorbatch-fakecudart-"+runtime.GOARCH+"-"+hex.EncodeToString(sum[:6])+".so")
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
