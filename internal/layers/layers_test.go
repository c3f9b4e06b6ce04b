// Package layers holds the test of the module's import rules, as Go's
// own go/build/deps_test.go holds the standard library's: a package that
// imports what its layer may not fails here, naming the path.
package layers

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const mod = "github.com/tensorbatch/tensorbatch"

// deps returns the packages pkg links that are not in the standard
// library.
func deps(t *testing.T, pkg string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", mod+"/"+pkg).CombinedOutput()
	require.NoError(t, err, "%s", out)
	return strings.Fields(string(out))
}

// The rules, each a set of packages and what they may not link. The
// heavy parts (cloud SDKs, Parquet, plotting, frameworks) stay out of the
// core; a cloud SDK is linked only by the program that imports its store.
func TestImportRules(t *testing.T) {
	t.Parallel()
	cloud := []string{"github.com/aws/", "github.com/Azure/", "github.com/AzureAD/", "golang.org/x/oauth2", "cloud.google.com/"}
	heavy := append([]string{"github.com/parquet-go/", "github.com/apache/arrow", "gonum.org/v1/plot", "google.golang.org/protobuf"}, cloud...)
	ours := func(names ...string) []string {
		var out []string
		for _, n := range names {
			out = append(out, mod+"/"+n)
		}
		return out
	}
	for _, r := range []struct {
		pkgs   []string
		forbid []string
		why    string
	}{
		{[]string{"collate", "pinned", "engine"}, append(heavy, ours("shards", "vision", "corpus", "datasets")...),
			"the core knows no file format, storage or framework"},
		{[]string{"corpus"}, append(heavy, ours("shards", "vision")...),
			"a program that reads a local corpus links nothing for storage or the clouds"},
		{[]string{"shards", "shards/store", "vision", "datasets"}, cloud,
			"a cloud SDK is linked only by the program that imports its store (shards/s3, shards/gcs, shards/azure)"},
		{[]string{"shards/store"}, ours("shards", "engine"),
			"the stores' interface is a leaf: the stores import it, not shards"},
	} {
		for _, p := range r.pkgs {
			for _, d := range deps(t, p) {
				for _, f := range r.forbid {
					// the module's packages by exact path, others by prefix
					if d == f || !strings.HasPrefix(f, mod) && strings.HasPrefix(d, f) {
						t.Errorf("%s links %s: %s", p, d, r.why)
					}
				}
			}
		}
	}
}

// A program that reads a local Megatron corpus links at most 10
// packages from outside the standard library, its own included.
func TestCorpusLinksLittle(t *testing.T) {
	t.Parallel()
	d := deps(t, "corpus")
	require.LessOrEqual(t, len(d), 10, "corpus links %d non-standard packages: %v", len(d), d)
}

// Every exported sentinel error of a public package that is made there
// (var ErrX = errors.New("...")) says its package first: "engine: ...".
// (Sentinels shared by several packages, as ErrNotRegular is, are made
// in an internal package and named by each.)
func TestSentinelErrorsNameTheirPackage(t *testing.T) {
	t.Parallel()
	for _, dir := range []string{"engine", "collate", "pinned", "vision", "shards", "shards/store", "corpus", "datasets"} {
		pkg := filepath.Base(dir)
		eachSource(t, filepath.Join("..", "..", dir), func(name string, f *ast.File) {
			ast.Inspect(f, func(n ast.Node) bool {
				vs, ok := n.(*ast.ValueSpec)
				if !ok {
					return true
				}
				for i, id := range vs.Names {
					if !strings.HasPrefix(id.Name, "Err") || !id.IsExported() || i >= len(vs.Values) {
						continue
					}
					call, ok := vs.Values[i].(*ast.CallExpr)
					if !ok || len(call.Args) == 0 {
						continue
					}
					if lit, ok := call.Args[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						msg, _ := strconv.Unquote(lit.Value)
						if !strings.HasPrefix(msg, pkg+": ") {
							t.Errorf("%s: %s is %q: want it to start %q", name, id.Name, msg, pkg+": ")
						}
					}
				}
				return true
			})
		})
	}
}

// eachSource parses each non-test Go file of dir and calls fn with it.
func eachSource(t *testing.T, dir string, fn func(name string, f *ast.File)) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	require.NoError(t, err)
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, 0)
		require.NoError(t, err)
		fn(name, f)
	}
}

// TestMessagesNameTheirOwnPackage: no string of a package's code begins
// with another package's prefix ("shards: " in corpus, once it moved out
// of shards): an error says where it was made. Every package of the
// module is walked (its tests may quote a wrapped error of another); the
// bare prefix ("csrc: ") is what a package trims off another's error.
func TestMessagesNameTheirOwnPackage(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	names := map[string]bool{}
	dirs := map[string]string{} // dir → its package's name
	require.NoError(t, filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "adapters") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.PackageClauseOnly)
		if err != nil {
			return err
		}
		if pkg := f.Name.Name; pkg != "main" {
			names[pkg] = true
			dirs[filepath.Dir(path)] = pkg
		}
		return nil
	}))
	require.Contains(t, names, "corpus")
	for dir, pkg := range dirs {
		eachSource(t, dir, func(name string, f *ast.File) {
			ast.Inspect(f, func(n ast.Node) bool {
				lit, ok := n.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					return true
				}
				msg, err := strconv.Unquote(lit.Value)
				if err != nil {
					return true
				}
				if other, rest, ok := strings.Cut(msg, ": "); ok && rest != "" && other != pkg && names[other] {
					t.Errorf("%s (package %s): %q begins with package %s's prefix", name, pkg, msg, other)
				}
				return true
			})
		})
	}
}
