package vision_test

import (
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/vision"
)

// oddNames are file names whose byte order differs from Python's order
// of their os.fsdecode'd strings, and some whose orders agree.
var oddNames = []string{"a", "B", "\u00e9", "\xc3", "\xff", "\x80", "\ue000", "\ud7ff", "\xed\xa0\x80", "\uffff",
	"\U00010000", "\xf0\x90\x80", "\xc0\xaf", "\xef\xbf\xbd", "z\xffa", "z\ue000"}

// oddFolder makes an ImageFolder whose class folders and files have the
// odd names.
func oddFolder(t *testing.T) string {
	root := t.TempDir()
	for _, c := range oddNames {
		for _, f := range oddNames {
			write(t, root, filepath.Join(c, f+".jpg"), "gray.jpg")
		}
		write(t, root, filepath.Join(c, "\xff", "x.jpg"), "gray.jpg")
		write(t, root, filepath.Join(c, "\ue000", "x.jpg"), "gray.jpg")
	}
	return root
}

// pyList runs a Python script that prints one os.fsencode'd name in hex
// a line, and returns the names.
func pyList(t *testing.T, script, root string) ([]string, error) {
	out, err := exec.Command(pythonPeer, "-c", script, root).Output()
	if err != nil {
		return nil, err
	}
	var names []string
	for _, l := range strings.Fields(string(out)) {
		b, err := hex.DecodeString(l)
		require.NoError(t, err)
		names = append(names, string(b))
	}
	return names, nil
}

func goOrder(ds *vision.Dataset) []string {
	got := append([]string(nil), ds.Classes()...)
	for _, s := range ds.Samples() {
		got = append(got, s.Path+":"+strconv.Itoa(s.Label))
	}
	return got
}

// torchvision's own order of find_classes and make_dataset: sorted
// os.scandir names, sorted(os.walk(followlinks=True)), sorted file names.
const pyImageFolder = `import os, sys
root = sys.argv[1]
classes = sorted(e.name for e in os.scandir(root) if e.is_dir())
out = list(classes)
for i, c in enumerate(classes):
    for r, _, fnames in sorted(os.walk(os.path.join(root, c), followlinks=True)):
        for f in sorted(fnames):
            out.append("%s:%d" % (os.path.join(r, f), i))
for s in out:
    print(os.fsencode(s).hex())
`

// ImageFolder orders classes and files as Python's sorted() orders their
// names, undecodable bytes included, as torchvision does.
func TestImageFolderOrderIsPythons(t *testing.T) {
	t.Parallel()
	root := oddFolder(t)
	ds, err := vision.ImageFolder(root, vision.Eval(16))
	require.NoError(t, err)
	defer ds.Close()
	idx := ds.ClassToIdx()
	assert.Less(t, idx["\xff"], idx["\ue000"], "U+DCFF before U+E000")
	assert.Less(t, idx["\ud7ff"], idx["\x80"], "U+D7FF before U+DC80")
	assert.Less(t, idx["\u00e9"], idx["\xc3"], "U+E9 before U+DCC3")
	assert.Less(t, idx["\xff"], idx["\xef\xbf\xbd"], "U+DCFF before U+FFFD")
	assert.Less(t, idx["\uffff"], idx["\U00010000"])
	if _, err := exec.LookPath(pythonPeer); err != nil {
		t.Skipf("%s: %v", pythonPeer, err)
	}
	want, err := pyList(t, pyImageFolder, root)
	require.NoError(t, err)
	assert.Equal(t, want, goOrder(ds), "Python's order")
}

// The same folder through torchvision.datasets.ImageFolder itself: skipped
// where torchvision is not importable, unless $CI or
// $TB_REQUIRE_TORCHVISION is set.
func TestImageFolderOrderIsTorchvisions(t *testing.T) {
	if testing.Short() {
		t.Skip("the torchvision peer: slow; go test without -short runs it")
	}
	root := oddFolder(t)
	want, err := pyList(t, `import os, sys
from torchvision.datasets import ImageFolder
ds = ImageFolder(sys.argv[1])
for s in list(ds.classes) + ["%s:%d" % (p, c) for p, c in ds.samples]:
    print(os.fsencode(s).hex())
`, root)
	if err != nil {
		msg := "torchvision is not importable by " + pythonPeer + ": " + err.Error()
		if ee, ok := err.(*exec.ExitError); ok {
			msg += ": " + strings.TrimSpace(string(ee.Stderr))
		}
		if os.Getenv("CI") != "" || os.Getenv("TB_REQUIRE_TORCHVISION") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	ds, err := vision.ImageFolder(root, vision.Eval(16))
	require.NoError(t, err)
	defer ds.Close()
	assert.Equal(t, want, goOrder(ds))
}
