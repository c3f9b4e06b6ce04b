package vision

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/tensorbatch/tensorbatch/internal/regfile"
)

// maxListBytes bounds a FileList's list, read whole: ImageNet's train
// list (1.28 M lines) is about 60 MB.
const maxListBytes = 1 << 30

// IMGExtensions are torchvision's IMG_EXTENSIONS: the files ImageFolder
// takes, matched case-insensitively. Each has a decoder here; the format
// is read from the file's first bytes, not its name.
var IMGExtensions = []string{".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp"}

// ImageFolder is torchvision's ImageFolder: one class per sub-folder of
// root (symbolic links followed), classes sorted by name as Python sorts
// them (by code point, a byte that is not UTF-8 read as the surrogate
// U+DC80-U+DCFF, as os.fsdecode reads it) and numbered in that order, and in each class every file with one of the extensions
// (IMGExtensions by default) in any sub-folder, sorted as torchvision's
// os.walk order sorts them. Sample paths are spelled as os.path.join
// spells them. A folder reached through two links is listed under both,
// as os.walk does; a link back to a folder above it is not followed
// (os.walk would follow it until the path is too long). A missing root,
// no class folder, or a class with no image is an error, as in
// torchvision.
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
		if isDir(joinPath(root, e.Name())) {
			classes = append(classes, e.Name())
		}
	}
	slices.SortFunc(classes, pyCompare)
	if len(classes) == 0 {
		return nil, fmt.Errorf("vision: ImageFolder: couldn't find any class folder in %s", root)
	}
	var samples []Sample
	var empty []string
	for label, c := range classes {
		n := len(samples)
		samples, err = walkClass(samples, joinPath(root, c), label, o.exts)
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

// joinPath is Python's os.path.join(dir, name) for a plain name: dir as
// given (not cleaned, unlike filepath.Join), so that sample paths are
// torchvision's strings.
func joinPath(dir, name string) string {
	if dir == "" || os.IsPathSeparator(dir[len(dir)-1]) {
		return dir + name
	}
	return dir + string(filepath.Separator) + name
}

func isDir(path string) bool {
	fi, err := os.Stat(path) // follows links, as os.scandir's is_dir()
	return err == nil && fi.IsDir()
}

// maxFolderPaths is the most paths through links by which a folder of
// an ImageFolder may be reached.
const maxFolderPaths = 1000

// walkClass appends the images under dir as torchvision's make_dataset
// does: sorted(os.walk(dir, followlinks=True)), each folder's files
// sorted.
func walkClass(samples []Sample, dir string, label int, exts []string) ([]Sample, error) {
	type folder struct {
		path  string
		files []string
	}
	var folders []folder
	visits := map[string]int{} // of each folder, resolved
	var walk func(path string, up []string) error
	walk = func(path string, up []string) error {
		if real, err := filepath.EvalSymlinks(path); err == nil {
			if slices.Contains(up, real) {
				return nil // a link cycle: os.walk would loop until the path is too long
			}
			up = append(up, real) // the folders above, resolved
			// Links may reach a folder by many paths, each listing its
			// images again, as os.walk does; links that fork at every
			// level reach the deepest folder 2^levels times, a walk
			// that would not end.
			if visits[real]++; visits[real] > maxFolderPaths {
				return fmt.Errorf("vision: %s: reached by more than %d paths through links (links that fork at every level): each would list its images again", real, maxFolderPaths)
			}
		}
		entries, err := os.ReadDir(path)
		if err != nil {
			return err
		}
		f := folder{path: path}
		var subs []string
		for _, e := range entries {
			p := joinPath(path, e.Name())
			if e.IsDir() || (e.Type()&os.ModeSymlink != 0 && isDir(p)) {
				subs = append(subs, p)
			} else {
				f.files = append(f.files, e.Name())
			}
		}
		folders = append(folders, f)
		for _, s := range subs {
			if err := walk(s, up); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(dir, nil); err != nil {
		return nil, err
	}
	slices.SortFunc(folders, func(a, b folder) int { return pyCompare(a.path, b.path) })
	for _, f := range folders {
		slices.SortFunc(f.files, pyCompare)
		for _, name := range f.files {
			if hasExt(name, exts) {
				samples = append(samples, Sample{Path: joinPath(f.path, name), Label: label})
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
// quoted paths work), "path label" separated by white space, or a JSON
// object {"path": ..., "label": ...} (JSONL; the label an integer or a
// class name); blank lines and lines that start with # are skipped. A
// first line whose label is not an integer and whose path names no file
// is a header ("path,label") when the other labels are integers or its
// path has no extension. Relative paths are resolved against the list's
// folder, or Root. Labels that are all integers are the class indices;
// otherwise they are class names, numbered in sorted order as
// ImageFolder numbers folders. A line without a path and a label is an
// error naming it; a listed file that is missing fails its sample when it
// is loaded. The list itself must be a regular file of at most 1 GiB
// (ErrNotRegular, ErrFileTooLarge).
func FileList(list string, t Transform, opts ...Option) (*Dataset, error) {
	o := options{root: filepath.Dir(list)}
	for _, f := range opts {
		f(&o)
	}
	data, err := regfile.ReadFile(list, maxListBytes)
	if err != nil {
		return nil, fmt.Errorf("vision: FileList: %w", err)
	}
	rows, err := readList(data)
	if err != nil {
		return nil, fmt.Errorf("vision: FileList %s: %w", list, err)
	}
	resolve := func(p string) string {
		if filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(o.root, p)
	}
	if len(rows) > 0 && !isInt(rows[0].label) {
		rest := rows[1:]
		_, err := os.Stat(resolve(rows[0].path))
		header := err != nil && (filepath.Ext(rows[0].path) == "" ||
			len(rest) > 0 && !slices.ContainsFunc(rest, func(r listRow) bool { return !isInt(r.label) }))
		if header {
			rows = rest
		}
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("vision: FileList %s: no images listed", list)
	}
	numeric := !slices.ContainsFunc(rows, func(r listRow) bool { return !isInt(r.label) })
	var classes []string
	idx := map[string]int{}
	if !numeric {
		for _, r := range rows {
			if _, ok := idx[r.label]; !ok {
				idx[r.label] = 0
				classes = append(classes, r.label)
			}
		}
		slices.SortFunc(classes, pyCompare)
		for i, c := range classes {
			idx[c] = i
		}
	}
	samples := make([]Sample, len(rows))
	for i, r := range rows {
		p := resolve(r.path)
		label := idx[r.label]
		if numeric {
			label, _ = strconv.Atoi(r.label)
			if label < 0 {
				return nil, fmt.Errorf("vision: FileList %s: line %d: %s has label %d, want >= 0", list, r.line, r.path, label)
			}
		}
		samples[i] = Sample{Path: p, Label: label}
	}
	return New(samples, classes, t, opts...)
}

func isInt(s string) bool {
	_, err := strconv.Atoi(s)
	return err == nil
}

// listRow is one line of a file list.
type listRow struct {
	path, label string
	line        int
}

// readList returns the rows of the file list b.
func readList(b []byte) ([]listRow, error) {
	var rows []listRow
	for n, line := range strings.Split(strings.TrimPrefix(string(b), "\ufeff"), "\n") {
		line = strings.TrimRight(line, "\r")
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasPrefix(strings.TrimSpace(line), "{") {
			r, err := jsonRow(line)
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", n+1, err)
			}
			r.line = n + 1
			rows = append(rows, r)
			continue
		}
		if strings.Contains(line, ",") {
			rec, err := csv.NewReader(strings.NewReader(line)).Read()
			if err != nil || len(rec) != 2 {
				return nil, fmt.Errorf("line %d: %q is not path,label", n+1, line)
			}
			if rec[0] == "" || strings.TrimSpace(rec[1]) == "" {
				return nil, fmt.Errorf("line %d: %q has no path or no label", n+1, line)
			}
			rows = append(rows, listRow{rec[0], strings.TrimSpace(rec[1]), n + 1})
			continue
		}
		line = strings.TrimSpace(line)
		i := strings.LastIndexAny(line, " \t")
		if i < 0 {
			return nil, fmt.Errorf("line %d: %q has no label", n+1, line)
		}
		rows = append(rows, listRow{strings.TrimSpace(line[:i]), line[i+1:], n + 1})
	}
	return rows, nil
}

// jsonRow reads a JSONL line of a file list: {"path": ..., "label": ...},
// the label an integer or a class name.
func jsonRow(line string) (listRow, error) {
	var v struct {
		Path  string          `json:"path"`
		Label json.RawMessage `json:"label"`
	}
	if json.Unmarshal([]byte(line), &v) != nil || v.Path == "" || len(v.Label) == 0 {
		return listRow{}, fmt.Errorf("%q is not {\"path\": ..., \"label\": ...}", line)
	}
	var i int64
	var name string
	switch {
	case v.Label[0] != 'n' && json.Unmarshal(v.Label, &i) == nil: // null would leave i as it is
		return listRow{path: v.Path, label: strconv.FormatInt(i, 10)}, nil
	case v.Label[0] == '"' && json.Unmarshal(v.Label, &name) == nil && strings.TrimSpace(name) != "":
		return listRow{path: v.Path, label: strings.TrimSpace(name)}, nil
	}
	return listRow{}, fmt.Errorf("label %s: want an integer or a class name", v.Label)
}
