// Package installtest checks that the README's Install and Quickstart
// sections work from a module outside this repository.
package installtest

import (
	"encoding/json"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/mod/module"
	"golang.org/x/mod/zip"
)

const core = "github.com/tensorbatch/tensorbatch"

// repoRoot is the repository's root, two folders up from this package.
func repoRoot(t *testing.T) string {
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	return root
}

// readme returns the README's Install commands (the go get lines of
// versions, and the go install lines) and the Quickstart program.
func readme(t *testing.T) (gets, installs [][]string, program string) {
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	require.NoError(t, err)
	text := string(data)
	for _, m := range regexp.MustCompile(`(?m)^go (get|install) (\S+@\S+)`).FindAllStringSubmatch(text, -1) {
		if m[1] == "get" {
			gets = append(gets, []string{"get", m[2]})
		} else {
			installs = append(installs, []string{"install", m[2]})
		}
	}
	m := regexp.MustCompile("(?s)```go\n(package main\n.*?)```").FindStringSubmatch(text)
	require.NotNil(t, m, "the README has a complete program (package main) in a go block")
	return gets, installs, m[1]
}

// release is the version the local module proxy serves this checkout as:
// the version the adapters' go.mod files require of the core.
const release = "v0.1.0"

// file is one file of the checkout, for zip.Create.
type file struct{ root, path string }

func (f file) Path() string                 { return f.path }
func (f file) Lstat() (fs.FileInfo, error)  { return os.Lstat(filepath.Join(f.root, f.path)) }
func (f file) Open() (io.ReadCloser, error) { return os.Open(filepath.Join(f.root, f.path)) }

// serve writes the modules of this checkout (the files git tracks or would
// track) as version release of a file-system module proxy under dir.
func serve(t *testing.T, dir, root string, paths []string) {
	out, err := exec.Command("git", "-C", root, "ls-files", "-co", "--exclude-standard").Output()
	if err != nil {
		t.Skipf("git cannot list the checkout's files: %v", err)
	}
	for _, path := range paths {
		sub := strings.TrimPrefix(strings.TrimPrefix(path, core), "/")
		var files []zip.File
		for _, name := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if rel, ok := strings.CutPrefix(name, sub); ok && (sub == "" || strings.HasPrefix(rel, "/")) {
				files = append(files, file{filepath.Join(root, sub), strings.TrimPrefix(rel, "/")})
			}
		}
		at := filepath.Join(dir, path, "@v")
		require.NoError(t, os.MkdirAll(at, 0o755))
		z, err := os.Create(filepath.Join(at, release+".zip"))
		require.NoError(t, err)
		require.NoError(t, zip.Create(z, module.Version{Path: path, Version: release}, files), path)
		require.NoError(t, z.Close())
		mod, err := os.ReadFile(filepath.Join(root, sub, "go.mod"))
		require.NoError(t, err)
		info, err := json.Marshal(map[string]string{"Version": release, "Time": "2026-11-25T00:00:00Z"})
		require.NoError(t, err)
		for name, data := range map[string][]byte{"list": []byte(release + "\n"), release + ".mod": mod, release + ".info": info} {
			require.NoError(t, os.WriteFile(filepath.Join(at, name), data, 0o644))
		}
	}
}

// goCmd runs the go command in dir with env added, and returns its combined
// output.
func goCmd(t *testing.T, dir string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "GOWORK=off", "GOFLAGS="), env...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go %s:\n%s", strings.Join(args, " "), out)
	return string(out)
}

// TestInstallFromAnotherModule follows the README in a new module in a
// temporary folder: the go get lines of Install, as written, then the
// Quickstart program, run, and a program that uses each adapter, built;
// then the go install line of the command, which is run.
// This repository's modules are not on the public proxy, so a file-system
// proxy in front of it serves this checkout as version release (the
// adapters resolve the core through their own go.mod, as a user's build
// does; their replace directives do not apply outside).
func TestInstallFromAnotherModule(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module from scratch")
	}
	if os.Getenv("CGO_ENABLED") == "0" {
		t.Skip("the go commands it runs build as the user's would, with cgo: the run with cgo covers it")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skipf("no go command on PATH: %v", err)
	}
	gets, installs, program := readme(t)
	require.Len(t, gets, 3, "the core and two adapters")
	require.Len(t, installs, 1, "the command")
	var paths []string
	for _, g := range gets {
		path, _, _ := strings.Cut(g[1], "@")
		require.True(t, strings.HasPrefix(path, core), "%s is a module of this repository", path)
		paths = append(paths, path)
	}
	proxy := t.TempDir()
	serve(t, proxy, repoRoot(t), paths)
	upstream := "https://proxy.golang.org"
	if p := os.Getenv("GOPROXY"); p != "" && p != "off" {
		upstream = p
	}
	// A module cache of the test's own: one a user's earlier run filled
	// holds an older checkout as the same version, which go would use.
	// The user's cache serves the other modules, as a proxy, offline.
	userCache := strings.TrimSpace(goCmd(t, t.TempDir(), nil, "env", "GOMODCACHE"))
	proxies := []string{"file://" + filepath.ToSlash(proxy), "file://" + filepath.ToSlash(filepath.Join(userCache, "cache", "download")), upstream}
	env := []string{"GOPROXY=" + strings.Join(proxies, ","), "GONOSUMDB=" + core, "GOMODCACHE=" + t.TempDir(), "GOFLAGS=-modcacherw"}
	dir := t.TempDir()
	goCmd(t, dir, env, "mod", "init", "example.com/quickstart")
	for _, g := range gets {
		goCmd(t, dir, env, g...)
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "main.go"), []byte(program), 0o644))
	goCmd(t, dir, env, "mod", "tidy")
	out := goCmd(t, dir, env, "run", ".")
	assert.Equal(t, "epoch 0: 992 samples\nepoch 1: 992 samples\n", out[strings.Index(out, "epoch 0"):])

	// Each adapter builds against the core from outside.
	adapters := `package main

import (
	"github.com/prometheus/client_golang/prometheus"

	tbgomlx "github.com/tensorbatch/tensorbatch/adapters/gomlx"
	"github.com/tensorbatch/tensorbatch/adapters/promstats"
)

func main() {
	_ = tbgomlx.Config{Inputs: []string{"image"}, Labels: []string{"label"}}
	_ = promstats.Register(prometheus.NewRegistry(), "train", nil)
}
`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "main.go"), []byte(adapters), 0o644))
	goCmd(t, dir, env, "mod", "tidy")
	goCmd(t, dir, env, "build", "-o", os.DevNull, ".")

	// The command installs, outside any module, and runs.
	bin := t.TempDir()
	for _, in := range installs {
		goCmd(t, t.TempDir(), append(env, "GOBIN="+bin), in...)
	}
	help, err := exec.Command(filepath.Join(bin, "tensorbatch"), "shards", "--help").CombinedOutput()
	require.NoError(t, err, "%s", help)
	assert.Contains(t, string(help), "verify")
}
