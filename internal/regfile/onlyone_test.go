package regfile_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// opens lists, by import path, the names that open or map a file (or
// read a file they open themselves) other than through this package. A
// reference to one, called or not, is a finding.
var opens = map[string][]string{
	// os.WriteFile and os.Create open an existing path as it is: a FIFO
	// blocks them, a link is followed (regfile.WriteFile replaces it).
	"os": {"Open", "OpenFile", "ReadFile", "DirFS", "OpenRoot", "OpenInRoot", "NewFile", "WriteFile", "Create"},
	// ioutil.ReadDir opens with os.Open: a FIFO blocks it. (os.ReadDir
	// opens with O_DIRECTORY: anything but a directory fails without
	// blocking, and it reads names, not data.)
	"io/ioutil": {"ReadFile", "ReadDir"},
	"syscall": {"Open", "Openat", "CreateFile", "Mmap", "Syscall", "Syscall6", "RawSyscall", "RawSyscall6",
		"SYS_OPEN", "SYS_OPENAT", "SYS_OPENAT2", "SYS_MMAP", "SYS_MMAP2", "SYS_OPEN_BY_HANDLE_AT"},
	"golang.org/x/sys/unix": {"Open", "Openat", "Openat2", "OpenByHandleAt", "Mmap", "MmapPtr", "Syscall", "Syscall6",
		"RawSyscall", "RawSyscall6", "SYS_OPEN", "SYS_OPENAT", "SYS_OPENAT2", "SYS_MMAP", "SYS_MMAP2", "SYS_OPEN_BY_HANDLE_AT"},
	"golang.org/x/sys/windows": {"Open", "CreateFile", "CreateFileMapping", "MapViewOfFile"},
	"C":                        {"open", "openat", "fopen", "fdopen", "mmap"},
	"net/http":                 {"Dir", "ServeFile"},
	"archive/zip":              {"OpenReader"},
	"debug/elf":                {"Open"},
	"debug/macho":              {"Open", "OpenFat"},
	"debug/pe":                 {"Open"},
	"text/template":            {"ParseFiles", "ParseGlob"},
	"html/template":            {"ParseFiles", "ParseGlob"},
	"go/parser":                {"ParseFile", "ParseDir"},
}

// allowed are the findings that are not reads of a file's data, by file
// (from the module's root) and name, each with the reason.
var allowed = map[string]string{
	"pinned/cpu_unix.go: unix.Mmap": "an anonymous mapping (MAP_ANON, fd -1): pinned host memory, not a file",
	"shards/cache_unix.go: os.OpenFile": "a shard's .lock file, opened O_RDWR|O_CREATE to hold flock on it: " +
		"its bytes are never read, and O_RDWR opens a FIFO without blocking",
	"shards/cache_other.go: os.OpenFile": "a shard's .lock file, opened O_RDWR|O_CREATE (no flock here): " +
		"its bytes are never read",
}

// skipped are the folders of the module that are not walked, with the
// reason. Test files (_test.go), testdata and nested modules are never
// walked.
var skipped = map[string]string{
	"bench":            "the benchmark harness: a program of its own, not the library",
	"examples":         "example programs, not the library",
	"scripts":          "set-up and CI helpers",
	"adapters":         "each adapter is a module of its own",
	"internal/regfile": "the one way itself",
	"internal/fakecudart": "test support: builds the fake CUDA runtime for tests from its C source, " +
		"which it reads; imported by tests only, never by the library",
}

// moduleRoot returns the folder of the go.mod above this package.
func moduleRoot(t *testing.T) string {
	dir, err := filepath.Abs(".")
	require.NoError(t, err)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		up := filepath.Dir(dir)
		require.NotEqual(t, dir, up, "no go.mod above %s", dir)
		dir = up
	}
}

// findOpens returns the references to the names of opens in the Go
// files of the module at root (not tests, not skipped), as
// "path:line: pkg.Name" with path slash-separated from root, and the
// allowlist keys they matched.
func findOpens(t *testing.T, root string) (found []string, matched map[string]bool) {
	matched = map[string]bool{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			name := d.Name()
			if rel != "." {
				if _, ok := skipped[rel]; ok || name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
					return filepath.SkipDir
				}
				if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
					return filepath.SkipDir // another module
				}
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		// The local name of each import of opens.
		names := map[string]string{}
		for _, imp := range f.Imports {
			p, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				return err
			}
			if _, ok := opens[p]; !ok {
				continue
			}
			local := p[strings.LastIndexByte(p, '/')+1:]
			if p == "io/ioutil" {
				local = "ioutil"
			}
			if imp.Name != nil {
				local = imp.Name.Name
			}
			if local == "." {
				found = append(found, fmt.Sprintf("%s:%d: import . %q", rel, fset.Position(imp.Pos()).Line, p))
				continue
			}
			names[local] = p
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			x, ok := sel.X.(*ast.Ident)
			if !ok {
				return true
			}
			p, ok := names[x.Name]
			if !ok || !slices.Contains(opens[p], sel.Sel.Name) {
				return true
			}
			key := fmt.Sprintf("%s: %s.%s", rel, x.Name, sel.Sel.Name)
			if _, ok := allowed[key]; ok {
				matched[key] = true
				return true
			}
			found = append(found, fmt.Sprintf("%s:%d: %s.%s", rel, fset.Position(sel.Pos()).Line, x.Name, sel.Sel.Name))
			return true
		})
		return nil
	})
	require.NoError(t, err)
	return found, matched
}

// TestOnlyOneWayToOpenAFile reads every Go file of the library (the
// module less tests and skipped) and fails where a file is opened or
// mapped other than through this package: the guarantee that only
// regular files, within a bound, are read holds by construction.
func TestOnlyOneWayToOpenAFile(t *testing.T) {
	t.Parallel()
	found, matched := findOpens(t, moduleRoot(t))
	if len(found) > 0 {
		t.Errorf("files opened or mapped other than through regfile (use Open, ReadFile, Buffer.Read or Map, "+
			"or add the use to allowed with the reason it reads no file's data):\n\t%s", strings.Join(found, "\n\t"))
	}
	for key := range allowed {
		assert.True(t, matched[key], "allowed lists %q, which the code no longer has: remove it", key)
	}
}
