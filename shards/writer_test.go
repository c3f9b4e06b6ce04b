package shards

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/engine"
)

// writeSamples writes n samples, key "%09d" and fields png (payload(i))
// and cls (i), with a Writer of cfg into dir and returns its list.
func writeSamples(t testing.TB, dir string, cfg WriterConfig, n int) Index {
	t.Helper()
	w, err := NewWriter(dir, cfg)
	require.NoError(t, err)
	for i := range n {
		require.NoError(t, w.Write(fmt.Sprintf("%09d", i), map[string][]byte{"png": payload(i), "cls": []byte(strconv.Itoa(i))}))
	}
	list, err := w.Close()
	require.NoError(t, err)
	return list
}

// readSamples reads every record of the Source that pattern names, in
// order, as key → fields.
func readSamples(t testing.TB, pattern string, opts ...Option) (keys []string, recs []engine.Record) {
	t.Helper()
	src, err := New(context.Background(), pattern, testSchema, decodeTest, opts...)
	require.NoError(t, err)
	defer src.Close()
	infos, err := src.Shards(context.Background())
	require.NoError(t, err)
	eachRecord(t, src, infos, func(rec engine.Record) {
		fields := map[string][]byte{}
		for k, v := range rec.Fields {
			fields[k] = append([]byte(nil), v...)
		}
		keys = append(keys, rec.Key)
		recs = append(recs, engine.Record{Key: rec.Key, Fields: fields})
	})
	return keys, recs
}

// TestWriterRoundTrip: what a Writer writes, in tar or Parquet, split
// into shards of about ShardBytes, reads back through a Source (its
// counts from the shardlist.json the Writer leaves) as written, and the
// folder holds nothing else.
func TestWriterRoundTrip(t *testing.T) {
	const n = 40
	for _, format := range []string{"tar", "parquet"} {
		t.Run(format, func(t *testing.T) {
			dir := t.TempDir()
			list := writeSamples(t, dir, WriterConfig{Format: format, ShardBytes: 8 << 10, Prefix: "train"}, n)
			require.Greater(t, len(list.Shards), 2, "ShardBytes splits the samples")
			want := []string{"shardlist.json"}
			total := 0
			for i, e := range list.Shards {
				assert.Equal(t, fmt.Sprintf("train-%06d.%s", i, format), e.URL)
				fi, err := os.Stat(filepath.Join(dir, e.URL))
				require.NoError(t, err)
				assert.Equal(t, fi.Size(), e.Bytes)
				assert.Equal(t, os.FileMode(0o644), fi.Mode().Perm())
				assert.Positive(t, e.Samples)
				total += e.Samples
				want = append(want, e.URL)
			}
			assert.Equal(t, n, total)
			entries, err := os.ReadDir(dir)
			require.NoError(t, err)
			var got []string
			for _, e := range entries {
				got = append(got, e.Name())
			}
			assert.ElementsMatch(t, want, got, "no temporary file is left")

			keys, recs := readSamples(t, dir+"/")
			require.Len(t, recs, n)
			for i, rec := range recs {
				assert.Equal(t, fmt.Sprintf("%09d", i), keys[i])
				assert.Equal(t, payload(i), rec.Fields["png"], "sample %d", i)
				assert.Equal(t, strconv.Itoa(i), string(rec.Fields[map[string]string{"tar": "cls", "parquet": "label"}[format]]), "sample %d", i)
			}
		})
	}
}

// TestWriterRefuses names the field or the sample of what it refuses,
// and Abort removes what was written.
func TestWriterRefuses(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		cfg  WriterConfig
		want string
	}{
		{WriterConfig{Format: "zip"}, "WriterConfig.Format"},
		{WriterConfig{ShardBytes: -1}, "WriterConfig.ShardBytes"},
		{WriterConfig{Prefix: "a/b"}, "WriterConfig.Prefix"},
	} {
		_, err := NewWriter(dir, tc.cfg)
		assert.ErrorContains(t, err, tc.want)
	}

	w, err := NewWriter(dir, WriterConfig{ShardBytes: 1})
	require.NoError(t, err)
	require.NoError(t, w.Write("a", map[string][]byte{"cls": []byte("1")}))
	require.NoError(t, w.Write("b", map[string][]byte{"cls": []byte("1")}))
	for key, fields := range map[string]map[string][]byte{
		"":      {"cls": nil},
		"x.y":   {"cls": nil},
		"empty": {},
	} {
		assert.ErrorContains(t, w.Write(key, fields), "shards: Writer: ", "key %q", key)
	}
	assert.ErrorContains(t, w.Write("d", map[string][]byte{"a/b": nil}), `sample "d": field "a/b"`)
	require.NoError(t, w.Abort())
	w, err = NewWriter(dir, WriterConfig{}) // one shard: a key twice in it
	require.NoError(t, err)
	require.NoError(t, w.Write("c", map[string][]byte{"cls": []byte("1")}))
	assert.ErrorContains(t, w.Write("c", map[string][]byte{"cls": []byte("1")}), `key "c" twice`)
	require.NoError(t, w.Abort())
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, entries, "Abort removes the shards and the one being written")

	pw, err := NewWriter(dir, WriterConfig{Format: "parquet"})
	require.NoError(t, err)
	assert.ErrorContains(t, pw.Write("a", map[string][]byte{"cls": []byte("1")}), `sample "a": no image field`)
	assert.ErrorContains(t, pw.Write("b", map[string][]byte{"jpg": nil}), `sample "b": no cls field`)
	assert.ErrorContains(t, pw.Write("c", map[string][]byte{"jpg": nil, "cls": []byte("cat")}), `sample "c": cls "cat" is not an integer label`)
	require.NoError(t, pw.Abort())
}

// TestPutToObjectStores: shards put to each store's emulator by
// WriterConfig.OnShard as each is complete (and removed), then their
// shardlist.json, read back from the bucket as written.
func TestPutToObjectStores(t *testing.T) {
	if testing.Short() {
		t.Skip("the store emulators: slow; go test without -short runs it")
	}
	wantKeys, wantRecs := readSamples(t, func() string {
		dir := t.TempDir()
		writeSamples(t, dir, WriterConfig{ShardBytes: 8 << 10}, 30)
		return dir + "/"
	}())
	for _, st := range objectStores {
		t.Run(st.scheme, func(t *testing.T) {
			storeBucket(t, st.start, "data")
			ctx := context.Background()
			o := &Opener{}
			defer o.CloseIdleConnections()
			dir, prefix := t.TempDir(), st.scheme+"data/up/"
			list := writeSamples(t, dir, WriterConfig{ShardBytes: 8 << 10, OnShard: func(path string, e IndexEntry) error {
				if err := o.Put(ctx, prefix+e.URL, path); err != nil {
					return err
				}
				return os.Remove(path)
			}}, 30)
			left, err := os.ReadDir(dir)
			require.NoError(t, err)
			require.Len(t, left, 1, "the shards were removed once put")
			require.NoError(t, o.Put(ctx, prefix+"shardlist.json", filepath.Join(dir, "shardlist.json")))
			keys, recs := readSamples(t, prefix, UseOpener(o))
			assert.Equal(t, wantKeys, keys)
			assert.Equal(t, wantRecs, recs)
			names, err := List(ctx, o, prefix)
			require.NoError(t, err)
			assert.Len(t, names, len(list.Shards))
		})
	}
}

// TestPutRefusesWhatCannotBeWritten: a URL that is not an object
// store's is an error naming it, and an OnShard error is Write's, naming
// the shard.
func TestPutRefusesWhatCannotBeWritten(t *testing.T) {
	dir := t.TempDir()
	writeSamples(t, dir, WriterConfig{}, 2)
	o := &Opener{}
	for _, name := range []string{"https://example.com/train/shardlist.json", "/tmp/elsewhere/shardlist.json"} {
		err := o.Put(context.Background(), name, filepath.Join(dir, "shardlist.json"))
		assert.ErrorContains(t, err, name+": not an object store's URL")
	}
	w, err := NewWriter(t.TempDir(), WriterConfig{ShardBytes: 1, OnShard: func(string, IndexEntry) error { return errors.New("no room") }})
	require.NoError(t, err)
	assert.EqualError(t, w.Write("a", map[string][]byte{"cls": nil}), "shards: Writer: shard shard-000000.tar: no room")
	require.NoError(t, w.Abort())
}

// A Writer closed with no sample lists no shard as an empty JSON array,
// which Python's readers take the length of, not as null.
func TestWriterCloseWithNoSample(t *testing.T) {
	dir := t.TempDir()
	w, err := NewWriter(dir, WriterConfig{})
	require.NoError(t, err)
	list, err := w.Close()
	require.NoError(t, err)
	assert.Empty(t, list.Shards)
	data, err := os.ReadFile(filepath.Join(dir, "shardlist.json"))
	require.NoError(t, err)
	var raw map[string]any
	require.NoError(t, json.Unmarshal(data, &raw))
	assert.Equal(t, []any{}, raw["shardlist"])
}
