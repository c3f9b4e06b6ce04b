package vision

import (
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// IMGExtensions are torchvision's IMG_EXTENSIONS: the files ImageFolder
// takes, matched case-insensitively.
var IMGExtensions = []string{".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp"}

// ImageFolder is torchvision's ImageFolder: one class per sub-folder of
// root (symbolic links followed), classes sorted by name and numbered in
// that order, and in each class every file with one of the extensions
// (IMGExtensions by default) in any sub-folder, sorted as torchvision's
// os.walk order sorts them. A missing root, no class folder, or a class
// with no image is an error, as in torchvision.
func ImageFolder(root string, t Transform, opts ...Option) (*Dataset, error) {
	o := options{exts: IMGExtensions}
	for _, f := range opts {
		f(&o)
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("vision: ImageFolder: %w", err)
	}
	var classes []string
	for _, e := range entries {
		if isDir(filepath.Join(root, e.Name())) {
			classes = append(classes, e.Name())
		}
	}
	slices.Sort(classes)
	if len(classes) == 0 {
		return nil, fmt.Errorf("vision: ImageFolder: couldn't find any class folder in %s", root)
	}
	var samples []Sample
	var empty []string
	for label, c := range classes {
		n := len(samples)
		samples, err = walkClass(samples, filepath.Join(root, c), label, o.exts)
		if err != nil {
			return nil, fmt.Errorf("vision: ImageFolder: %w", err)
		}
		if len(samples) == n {
			empty = append(empty, c)
		}
	}
	if len(empty) > 0 {
		return nil, fmt.Errorf("vision: ImageFolder: found no valid file for the classes %s in %s; supported extensions are: %s",
			strings.Join(empty, ", "), root, strings.Join(o.exts, ", "))
	}
	return New(samples, classes, t, opts...)
}

func isDir(path string) bool {
	fi, err := os.Stat(path) // follows links, as os.scandir's is_dir()
	return err == nil && fi.IsDir()
}

// walkClass appends the images under dir as torchvision's make_dataset
// does: sorted(os.walk(dir, followlinks=True)), each folder's files
// sorted.
func walkClass(samples []Sample, dir string, label int, exts []string) ([]Sample, error) {
	type folder struct {
		path  string
		files []string
	}
	var folders []folder
	seen := map[string]bool{}
	var walk func(path string) error
	walk = func(path string) error {
		if real, err := filepath.EvalSymlinks(path); err == nil {
			if seen[real] {
				return nil // a link cycle: os.walk would loop until the path is too long
			}
			seen[real] = true
		}
		entries, err := os.ReadDir(path)
		if err != nil {
			return err
		}
		f := folder{path: path}
		var subs []string
		for _, e := range entries {
			p := filepath.Join(path, e.Name())
			if e.IsDir() || (e.Type()&os.ModeSymlink != 0 && isDir(p)) {
				subs = append(subs, p)
			} else {
				f.files = append(f.files, e.Name())
			}
		}
		folders = append(folders, f)
		for _, s := range subs {
			if err := walk(s); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(dir); err != nil {
		return nil, err
	}
	slices.SortFunc(folders, func(a, b folder) int { return strings.Compare(a.path, b.path) })
	for _, f := range folders {
		slices.Sort(f.files)
		for _, name := range f.files {
			if hasExt(name, exts) {
				samples = append(samples, Sample{Path: filepath.Join(f.path, name), Label: label})
			}
		}
	}
	return samples, nil
}

func hasExt(name string, exts []string) bool {
	lower := strings.ToLower(name)
	for _, e := range exts {
		if strings.HasSuffix(lower, strings.ToLower(e)) {
			return true
		}
	}
	return false
}

// FileList reads a list of images: one "path,label" per line (CSV, so
// quoted paths work; a first line whose label is not a number is a
// header) or "path label" separated by white space. Relative paths are
// resolved against the list's folder, or Root. Labels that are all
// integers are the class indices; otherwise they are class names,
// numbered in sorted order as ImageFolder numbers folders.
func FileList(list string, t Transform, opts ...Option) (*Dataset, error) {
	o := options{root: filepath.Dir(list)}
	for _, f := range opts {
		f(&o)
	}
	f, err := os.Open(list)
	if err != nil {
		return nil, fmt.Errorf("vision: FileList: %w", err)
	}
	defer f.Close()
	rows, err := readList(f)
	if err != nil {
		return nil, fmt.Errorf("vision: FileList %s: %w", list, err)
	}
	if len(rows) > 0 {
		if _, err := strconv.Atoi(rows[0][1]); err != nil && rows[0][2] == "csv" {
			rows = rows[1:] // header
		}
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("vision: FileList %s: no images listed", list)
	}
	numeric := true
	for _, r := range rows {
		if _, err := strconv.Atoi(r[1]); err != nil {
			numeric = false
			break
		}
	}
	var classes []string
	idx := map[string]int{}
	if !numeric {
		for _, r := range rows {
			if _, ok := idx[r[1]]; !ok {
				idx[r[1]] = 0
				classes = append(classes, r[1])
			}
		}
		slices.Sort(classes)
		for i, c := range classes {
			idx[c] = i
		}
	}
	samples := make([]Sample, len(rows))
	for i, r := range rows {
		p := r[0]
		if !filepath.IsAbs(p) {
			p = filepath.Join(o.root, p)
		}
		label := idx[r[1]]
		if numeric {
			label, _ = strconv.Atoi(r[1])
			if label < 0 {
				return nil, fmt.Errorf("vision: FileList %s: %s has label %d, want >= 0", list, r[0], label)
			}
		}
		samples[i] = Sample{Path: p, Label: label}
	}
	return New(samples, classes, t, opts...)
}

// readList returns [path, label, kind] rows.
func readList(r io.Reader) ([][3]string, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	var rows [][3]string
	for n, line := range strings.Split(string(b), "\n") {
		line = strings.TrimRight(line, "\r")
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.Contains(line, ",") {
			rec, err := csv.NewReader(strings.NewReader(line)).Read()
			if err != nil || len(rec) != 2 {
				return nil, fmt.Errorf("line %d: %q is not path,label", n+1, line)
			}
			rows = append(rows, [3]string{rec[0], strings.TrimSpace(rec[1]), "csv"})
			continue
		}
		i := strings.LastIndexAny(strings.TrimSpace(line), " \t")
		if i < 0 {
			return nil, fmt.Errorf("line %d: %q has no label", n+1, line)
		}
		line = strings.TrimSpace(line)
		rows = append(rows, [3]string{strings.TrimSpace(line[:i]), strings.TrimSpace(line[i+1:]), "ws"})
	}
	return rows, nil
}
