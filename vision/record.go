package vision

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/engine"
	"github.com/tensorbatch/tensorbatch/internal/recycle"
)

// recordImageExts are the members Record takes an image from when the
// one it names is missing, in this order: WebDataset's usual aliases,
// then the rest of the formats the package decodes.
var recordImageExts = []string{"jpg", "jpeg", "png", "webp", "bmp", "tif", "tiff", "ppm", "pgm", "pbm", "pnm"}

// recordLabelExts are the members Record takes a label from when the one
// it names is missing, in this order: a decimal integer, or JSON.
var recordLabelExts = []string{"cls", "label", "json"}

// Record returns a shards.DecodeFunc (the same underlying type; this
// package does not import shards) that decodes a WebDataset record into
// a slot of the Pipeline's Schema:
//
//	src, err := shards.New(ctx, "train-{0000..0999}.tar", p.Schema(), p.Record("jpg", "cls"))
//
// The image comes from the member image names, or, where the record has
// none, from the first of jpg, jpeg, png, webp, bmp, tif, tiff, ppm, pgm,
// pbm and pnm it has; it is decoded as Decode does, with the slot's RNG,
// so a record gives the bits a Dataset gives for the same file, index and
// seed. The label comes from the member label names, or else the first
// of cls, label and json the record has: a decimal integer (WebDataset's
// .cls), or, in a .json member, a JSON object whose key label, "label" or
// "cls" (the first present) holds an integer. It is written into the
// label field (int64). A missing or malformed member, a negative label or
// one outside int64 is an error naming the shard, the sample's key and
// the member; a failed decode wraps the errors Decode's do.
func (p *Pipeline) Record(image, label string) func(ctx context.Context, rec engine.Record, s *engine.Slot) error {
	imageField, labelField := p.o.image, p.o.label
	return func(ctx context.Context, rec engine.Record, s *engine.Slot) error {
		ext, data, err := RecordImage(rec, image)
		if err != nil {
			return err
		}
		y, err := recordLabel(rec, label)
		if err != nil {
			return err
		}
		if err := p.decodeBytes(data, s.Rand(), s.Tensor(imageField).Bytes()); err != nil {
			return fmt.Errorf("vision: %s: sample %q: .%s: %w", rec.Shard, rec.Key, ext, err)
		}
		collate.As[int64](s.Tensor(labelField))[0] = y
		recycle.Release(ctx) // the decoder kept none of rec's bytes: the Source may reuse them
		return nil
	}
}

// CheckRecord returns the error that Record(image, label) would refuse
// rec with before it decodes: a missing image or label member, a label
// that is not one, or an image that Check refuses. tensorbatch shards
// verify checks every record so.
func (p *Pipeline) CheckRecord(rec engine.Record, image, label string) error {
	ext, data, err := RecordImage(rec, image)
	if err != nil {
		return err
	}
	if _, err := recordLabel(rec, label); err != nil {
		return err
	}
	if err := p.check(data); err != nil {
		return fmt.Errorf("vision: %s: sample %q: .%s: %w", rec.Shard, rec.Key, ext, err)
	}
	return nil
}

// RecordImage returns the image member of rec that Record(ext, ...)
// decodes, and its extension: ext if rec has it, else the first of jpg,
// jpeg, png, webp, bmp, tif, tiff, ppm, pgm, pbm and pnm it has; an error
// naming the shard and key where it has none.
func RecordImage(rec engine.Record, ext string) (string, []byte, error) {
	if b, ok := rec.Fields[ext]; ok && ext != "" {
		return ext, b, nil
	}
	for _, e := range recordImageExts {
		if b, ok := rec.Fields[e]; ok {
			return e, b, nil
		}
	}
	want := "no image member (" + strings.Join(recordImageExts, ", ") + ")"
	if ext != "" {
		want = "no ." + ext + " member nor any image member (" + strings.Join(recordImageExts, ", ") + ")"
	}
	return "", nil, fmt.Errorf("vision: %s: sample %q has %s; it has %s", rec.Shard, rec.Key, want, members(rec))
}

// recordLabel returns the label of rec, from member ext if it has one,
// else from the first of recordLabelExts.
func recordLabel(rec engine.Record, ext string) (int64, error) {
	from := ext
	b, ok := rec.Fields[ext]
	if !ok || ext == "" {
		for _, e := range recordLabelExts {
			if b, ok = rec.Fields[e]; ok {
				from = e
				break
			}
		}
	}
	if !ok {
		want := "no label member (" + strings.Join(recordLabelExts, ", ") + ")"
		if ext != "" {
			want = "no ." + ext + " member nor any label member (" + strings.Join(recordLabelExts, ", ") + ")"
		}
		return 0, fmt.Errorf("vision: %s: sample %q has %s; it has %s", rec.Shard, rec.Key, want, members(rec))
	}
	var v int64
	var err error
	if from == "json" || strings.HasSuffix(from, ".json") {
		v, err = jsonLabel(b, ext)
	} else {
		v, err = intLabel(b)
	}
	if err != nil {
		return 0, fmt.Errorf("vision: %s: sample %q: .%s: %w", rec.Shard, rec.Key, from, err)
	}
	return v, nil
}

// intLabel parses a decimal class index, white space around it allowed.
func intLabel(b []byte) (int64, error) {
	s := string(bytes.TrimSpace(b))
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		if len(s) > 32 {
			s = s[:32] + "..."
		}
		if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
			return 0, fmt.Errorf("label %s is outside int64", s)
		}
		return 0, fmt.Errorf("label %q is not a decimal integer", s)
	}
	if v < 0 {
		return 0, fmt.Errorf("label %d, want >= 0", v)
	}
	return v, nil
}

// jsonLabel reads the label from a JSON object: its key named key, else
// "label", else "cls".
func jsonLabel(b []byte, key string) (int64, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return 0, fmt.Errorf("not a JSON object: %w", err)
	}
	var keys []string
	for _, k := range []string{key, "label", "cls"} {
		if k != "" && k != "json" && !strings.HasSuffix(k, ".json") && !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	for _, k := range keys {
		raw, ok := m[k]
		if !ok {
			continue
		}
		v, err := intLabel(raw) // valid JSON, so a bare number parses, and "3", 3.0 and 1e3 do not
		if err != nil {
			return 0, fmt.Errorf("key %q: %w", k, err)
		}
		return v, nil
	}
	return 0, fmt.Errorf("no key %s in the JSON object (it has %s)", strings.Join(quoteAll(keys), ", "), strings.Join(quoteAll(slices.Sorted(maps.Keys(m))), ", "))
}

func quoteAll(s []string) []string {
	q := make([]string, len(s))
	for i, v := range s {
		q[i] = strconv.Quote(v)
	}
	return q
}

// members lists rec's members, as ".cls, .jpg".
func members(rec engine.Record) string {
	if len(rec.Fields) == 0 {
		return "no members"
	}
	exts := slices.Sorted(maps.Keys(rec.Fields))
	for i, e := range exts {
		exts[i] = "." + e
	}
	return strings.Join(exts, ", ")
}
