package shards

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/engine"
	"github.com/tensorbatch/tensorbatch/engine/enginetest"
	"github.com/tensorbatch/tensorbatch/internal/s3test"
	"github.com/tensorbatch/tensorbatch/vision"
)

// loadAll reads every batch of epoch through a loader of src.
func loadAll(t testing.TB, src engine.Iterable, sc engine.IterableConfig, cfg engine.Config, epoch int) ([][]int, [][]byte, engine.Stats, error) {
	t.Helper()
	d, err := engine.FromIterable(context.Background(), src, sc)
	require.NoError(t, err)
	return load(t, d, cfg, epoch)
}

// load reads every batch of epoch through a loader of d.
func load(t testing.TB, d *engine.IterableDataset, cfg engine.Config, epoch int) ([][]int, [][]byte, engine.Stats, error) {
	t.Helper()
	if cfg.WorldSize == 0 {
		cfg.WorldSize = 1
	}
	if cfg.Backend == "" {
		cfg.Backend = "cpu"
	}
	l, err := engine.New(d, cfg)
	require.NoError(t, err)
	defer l.Close()
	ids, data, err := batches(t, l, epoch)
	return ids, data, l.Stats(), err
}

func flat(ids [][]int) []int {
	var out []int
	for _, b := range ids {
		out = append(out, b...)
	}
	return out
}

func TestSourceLocalEpochVisitsEverySampleOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, pattern := writeShards(t, dir, 10, 3, 0, 7)
	src, err := New(context.Background(), pattern, testSchema, decodeTest)
	require.NoError(t, err)
	infos, err := src.Shards(context.Background())
	require.NoError(t, err)
	require.Len(t, infos, 4)
	assert.Equal(t, []int{10, 3, 0, 7}, []int{infos[0].Samples, infos[1].Samples, infos[2].Samples, infos[3].Samples})
	assert.Equal(t, filepath.Join(dir, "train-0002.tar"), infos[2].Name)

	sc := engine.IterableConfig{ShuffleShards: true, ShuffleBuffer: 6}
	ref, refData, _, err := loadAll(t, src, sc, engine.Config{BatchSize: 4, Seed: 7}, 1)
	require.NoError(t, err)
	got := flat(ref)
	assert.Len(t, got, 20)
	assert.ElementsMatch(t, seq(20), got)
	assert.NotEqual(t, seq(20), got, "shuffled")
	for _, w := range []int{0, 1, 3} {
		ids, data, _, err := loadAll(t, src, sc, engine.Config{BatchSize: 4, Seed: 7, Workers: w, PrefetchFactor: 3}, 1)
		require.NoError(t, err)
		assert.Equal(t, ref, ids, "workers %d", w)
		assert.Equal(t, refData, data, "workers %d: bit-identical batches", w)
	}
}

func seq(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

func TestSourceHTTPMatchesLocalUnderFaults(t *testing.T) {
	f := newFaultServer(t)
	_, pattern := writeShards(t, f.dir, 40, 25, 33)
	local, err := New(context.Background(), pattern, testSchema, decodeTest)
	require.NoError(t, err)
	sc := engine.IterableConfig{ShuffleShards: true, ShuffleBuffer: 16, ReadAheadBytes: 64 << 10}
	cfg := engine.Config{BatchSize: 8, Seed: 3, Workers: 2}
	want, wantData, _, err := loadAll(t, local, sc, cfg, 0)
	require.NoError(t, err)

	o := fastOpener()
	o.Timeout = time.Second
	defer o.CloseIdleConnections()
	remote, err := New(context.Background(), f.URL+"/train-{0000..0002}.tar", testSchema, decodeTest, UseOpener(o))
	require.NoError(t, err)
	// No shardlist.json: counted by scanning, under faults too.
	f.inject(func(f *faultServer) { f.fail, f.cuts = 1, []int64{5000} })
	d, err := engine.FromIterable(context.Background(), remote, sc)
	require.NoError(t, err)
	assert.Equal(t, 98, d.Len())
	assert.Len(t, f.requests(), 1+3+2, "shardlist.json, 3 shards, 2 retries")
	assert.EqualValues(t, 2, o.ReadRetries())

	f.inject(func(f *faultServer) {
		f.fail, f.cuts = 2, []int64{100, 30000, 7}
		f.stalls, f.stallAt, f.stallFor = 1, 20000, 10*time.Second
	})
	got, gotData, st, err := load(t, d, cfg, 0)
	require.NoError(t, err)
	assert.Equal(t, want, got)
	assert.Equal(t, wantData, gotData, "the same bytes as the local run")
	assert.EqualValues(t, 2+2+3+1, o.ReadRetries())
	assert.EqualValues(t, 2+2+3+1, st.Dataset["read_retries"], "Stats.Dataset read_retries")
}

func TestSourceShardList(t *testing.T) {
	f := newFaultServer(t)
	paths, pattern := writeShards(t, f.dir, 5, 6)
	l, err := BuildIndex(context.Background(), nil, paths)
	require.NoError(t, err)
	assert.Equal(t, "wids-shard-index-v1", l.Kind)
	assert.Equal(t, []IndexEntry{{"train-0000.tar", 5, fileSize(t, paths[0])}, {"train-0001.tar", 6, fileSize(t, paths[1])}}, l.Shards)
	l.Shards[1].Samples = 4 // a list is checked against the data: shard 1 holds 6
	data, err := json.Marshal(l)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(f.dir, "shardlist.json"), data, 0o644))

	o := fastOpener()
	defer o.CloseIdleConnections()
	remote, err := New(context.Background(), f.URL+"/train-{0000..0001}.tar", testSchema, decodeTest, UseOpener(o))
	require.NoError(t, err)
	infos, err := remote.Shards(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []engine.ShardInfo{{Name: f.URL + "/train-0000.tar", Samples: 5}, {Name: f.URL + "/train-0001.tar", Samples: 4}}, infos)
	reqs := f.requests()
	require.Len(t, reqs, 3, "the list, and one request per shard for its size")
	assert.Equal(t, "/shardlist.json ", reqs[0])

	// Locally, a list is read only when named.
	local, err := New(context.Background(), pattern, testSchema, decodeTest)
	require.NoError(t, err)
	infos, err = local.Shards(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 6, infos[1].Samples)
	local, err = New(context.Background(), pattern, testSchema, decodeTest, IndexFile(filepath.Join(f.dir, "shardlist.json")))
	require.NoError(t, err)
	infos, err = local.Shards(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 4, infos[1].Samples)
	ids, _, _, err := loadAll(t, local, engine.IterableConfig{}, engine.Config{BatchSize: 3}, 0)
	assert.Equal(t, seq(6), flat(ids), "the batches before shard 1's last listed record...")
	require.Error(t, err, "...which comes with the error of the record past it")
	assert.Contains(t, err.Error(), paths[1]+": more records than the 4 it is listed with")

	missing, err := New(context.Background(), pattern, testSchema, decodeTest, IndexFile(filepath.Join(f.dir, "nope.json")))
	require.NoError(t, err)
	_, err = missing.Shards(context.Background())
	assert.ErrorContains(t, err, "nope.json: not found")
	require.NoError(t, os.WriteFile(filepath.Join(f.dir, "bad.json"), []byte("{"), 0o644))
	bad, err := New(context.Background(), pattern, testSchema, decodeTest, IndexFile(filepath.Join(f.dir, "bad.json")))
	require.NoError(t, err)
	_, err = bad.Shards(context.Background())
	assert.ErrorContains(t, err, "bad.json: unexpected end of JSON input")
}

// TestSourceOfAShardList: New takes a shard list by its name, local or
// remote, as the shards it names (relative to its folder, or absolute)
// with their counts, read once; a missing list is fs.ErrNotExist.
func TestSourceOfAShardList(t *testing.T) {
	f := newFaultServer(t)
	paths, _ := writeShards(t, f.dir, 5, 6)
	sub := filepath.Join(f.dir, "lists")
	require.NoError(t, os.MkdirAll(sub, 0o755))
	l := Index{Kind: "wids-shard-index-v1", Version: 1, Shards: []IndexEntry{{URL: "../train-0001.tar", Samples: 6}, {URL: paths[0], Samples: 5}}}
	data, err := json.Marshal(l)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(sub, "shards.json"), data, 0o644))
	src, err := New(context.Background(), filepath.Join(sub, "shards.json"), testSchema, decodeTest)
	require.NoError(t, err)
	infos, err := src.Shards(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []engine.ShardInfo{{Name: sub + "/../train-0001.tar", Samples: 6}, {Name: paths[0], Samples: 5}}, infos)

	l.Shards[1].URL = "train-0000.tar" // remote entries are relative to the list's URL
	l.Shards[0].URL = "train-0001.tar"
	data, err = json.Marshal(l)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(f.dir, "shardlist.json"), data, 0o644))
	o := fastOpener()
	defer o.CloseIdleConnections()
	remote, err := New(context.Background(), f.URL+"/shardlist.json", testSchema, decodeTest, UseOpener(o))
	require.NoError(t, err)
	infos, err = remote.Shards(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []engine.ShardInfo{{Name: f.URL + "/train-0001.tar", Samples: 6}, {Name: f.URL + "/train-0000.tar", Samples: 5}}, infos)
	assert.Equal(t, 1, strings.Count(strings.Join(f.requests(), "\n"), "/shardlist.json"), "the list is read once")

	for _, name := range []string{filepath.Join(sub, "missing.json"), f.URL + "/missing.json"} {
		_, err := New(context.Background(), name, testSchema, decodeTest, UseOpener(o))
		assert.ErrorIs(t, err, fs.ErrNotExist, name)
		assert.ErrorContains(t, err, "missing.json", name)
	}
}

func fileSize(t *testing.T, p string) int64 {
	fi, err := os.Stat(p)
	require.NoError(t, err)
	return fi.Size()
}

func TestSourceErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	paths, pattern := writeShards(t, dir, 4, 4)
	_, err := New(context.Background(), "a{", testSchema, decodeTest)
	assert.ErrorContains(t, err, "unmatched {")
	_, err = New(context.Background(), pattern, testSchema, nil)
	assert.ErrorContains(t, err, "nil DecodeFunc")
	_, err = New(context.Background(), "gopher://x/{a,b}", testSchema, decodeTest)
	assert.ErrorContains(t, err, "unknown scheme")

	// A missing shard fails the listing, naming it.
	src, err := New(context.Background(), filepath.Join(dir, "train-{0000..0002}.tar"), testSchema, decodeTest)
	require.NoError(t, err)
	_, err = engine.FromIterable(context.Background(), src, engine.IterableConfig{})
	assert.ErrorContains(t, err, "train-0002.tar: no such file or directory")

	// A shard truncated after it was counted fails the epoch naming the
	// shard and member, after the batches before it.
	src, err = New(context.Background(), pattern, testSchema, decodeTest)
	require.NoError(t, err)
	d, err := engine.FromIterable(context.Background(), src, engine.IterableConfig{})
	require.NoError(t, err)
	data, err := os.ReadFile(paths[1])
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(paths[1], data[:len(data)-1500], 0o644))
	l, err := engine.New(d, engine.Config{BatchSize: 2, WorldSize: 1, Backend: "cpu"})
	require.NoError(t, err)
	defer l.Close()
	ids, _, err := batches(t, l, 0)
	assert.Equal(t, [][]int{{0, 1}, {2, 3}, {4, 5}}, ids)
	require.Error(t, err)
	assert.Contains(t, err.Error(), paths[1])
	assert.Contains(t, err.Error(), "s000007")

	// A decode error names the shard and key.
	noCls := filepath.Join(dir, "nocls.tar")
	require.NoError(t, os.WriteFile(noCls, tarBytes(t, tarMember{name: "k1.bin", data: []byte("x")}), 0o644))
	src, err = New(context.Background(), noCls, testSchema, decodeTest)
	require.NoError(t, err)
	_, _, _, err = loadAll(t, src, engine.IterableConfig{}, engine.Config{}, 0)
	require.Error(t, err)
	assert.Contains(t, err.Error(), noCls+`: sample "k1" has no .cls member (it has .bin)`)
	assert.True(t, strings.HasPrefix(err.Error(), "engine: sample 0"), err.Error())
}

// bigPayload is the .bin member of sample id in the recycling tests:
// 4 KiB and more, so that its buffer is a recycled one; every tenth is
// more than a TarReader allocates before its bytes arrive (1 MiB), so
// that it is read growing.
func bigPayload(id int) []byte {
	n := 8<<10 + (id*4099)%(40<<10)
	if id%10 == 3 {
		n = 1<<20 + id*1000
	}
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(id*131 + i*7 + i>>8)
	}
	return b
}

// lentOut reports whether b is a buffer that recordBuffers handed out
// and nobody gave back.
func lentOut(b []byte) bool {
	recordBuffers.mu.Lock()
	defer recordBuffers.mu.Unlock()
	_, ok := recordBuffers.out[uintptr(unsafe.Pointer(&b[0]))]
	return ok
}

// Source.Decode takes back the large fields of the records its readers
// made where the DecodeFunc released them (shards.Release, as
// vision.Pipeline.Record does), and the records read after them into those buffers hold their
// own bytes. A DecodeFunc that does not release them keeps them intact,
// and a record the Source did not make keeps its bytes, Decode or not.
func TestDecodeTakesBackLargeFields(t *testing.T) {
	dir := t.TempDir()
	var names []string
	id := 0
	for s := range 3 {
		var ms []tarMember
		for range 20 {
			key := fmt.Sprintf("s%06d", id)
			ms = append(ms, tarMember{name: key + ".cls", data: fmt.Append(nil, id)},
				tarMember{name: key + ".bin", data: bigPayload(id)})
			id++
		}
		names = append(names, filepath.Join(dir, fmt.Sprintf("train-%d.tar", s)))
		require.NoError(t, os.WriteFile(names[s], tarBytes(t, ms...), 0o644))
	}
	for _, release := range []bool{true, false} {
		t.Run(fmt.Sprintf("release=%v", release), func(t *testing.T) {
			decoded := 0
			kept := map[int64][]byte{} // without release: the fields, as a DecodeFunc may keep them
			src, err := FromNames(names, testSchema, func(ctx context.Context, rec engine.Record, _ *engine.Slot) error {
				id, err := Int(rec, "cls")
				if err != nil {
					return err
				}
				if !bytes.Equal(rec.Fields["bin"], bigPayload(int(id))) {
					return fmt.Errorf("sample %s: .bin is not its own", rec.Key)
				}
				decoded++
				if release {
					Release(ctx)
				} else {
					kept[id] = rec.Fields["bin"]
				}
				return nil
			})
			require.NoError(t, err)
			ctx := context.Background()
			infos, err := src.Shards(ctx)
			require.NoError(t, err)

			foreign := bigPayload(7)
			want := bytes.Clone(foreign)
			for range 2 { // the second pass reads into the first's buffers, if released
				eachRecord(t, src, infos, func(rec engine.Record) {
					b := rec.Fields["bin"]
					require.True(t, lentOut(b), "sample %s: .bin is not a recycled buffer", rec.Key)
					require.NoError(t, src.Decode(ctx, rec, nil))
					assert.Equal(t, !release, lentOut(b), "sample %s: .bin taken back: %v", rec.Key, !lentOut(b))

					// A record the Source did not read: Decode leaves its bytes.
					frec := engine.Record{Key: "s000007", Shard: "mine", Fields: map[string][]byte{"cls": []byte("7"), "bin": foreign}}
					require.NoError(t, src.Decode(ctx, frec, nil))
				})
			}
			assert.Equal(t, 2*2*id, decoded)
			assert.Equal(t, want, foreign, "a record the Source did not read was overwritten")
			for id, b := range kept {
				require.Equal(t, bigPayload(int(id)), b, "sample %d: a field kept by the DecodeFunc was overwritten", id)
			}
		})
	}
}

// Through vision.Pipeline.Record, the DecodeFunc of image shards, the
// Source takes back the images' buffers.
func TestDecodeTakesBackImagesOfPipelineRecord(t *testing.T) {
	var ms []tarMember
	for id := range 4 {
		ms = append(ms, tarMember{name: fmt.Sprintf("%04d.jpg", id), data: s3test.JPEG(id, 256)},
			tarMember{name: fmt.Sprintf("%04d.cls", id), data: fmt.Append(nil, id)})
	}
	name := filepath.Join(t.TempDir(), "train.tar")
	require.NoError(t, os.WriteFile(name, tarBytes(t, ms...), 0o644))
	p, err := vision.NewPipeline(vision.Eval(32))
	require.NoError(t, err)
	defer p.Close()
	src, err := FromNames([]string{name}, p.Schema(), p.Record("jpg", "cls"))
	require.NoError(t, err)
	ctx := context.Background()
	infos, err := src.Shards(ctx)
	require.NoError(t, err)
	layout, err := collate.NewLayout(p.Schema(), 1)
	require.NoError(t, err)
	slot := enginetest.NewSlot(1, 0, 0, layout, make([]byte, layout.Size()), 0)
	n := 0
	eachRecord(t, src, infos, func(rec engine.Record) {
		b := rec.Fields["jpg"]
		require.Greater(t, len(b), 8<<10)
		require.True(t, lentOut(b), "sample %s: .jpg is not a recycled buffer", rec.Key)
		require.NoError(t, src.Decode(ctx, rec, slot))
		assert.False(t, lentOut(b), "sample %s: .jpg was not taken back", rec.Key)
		n++
	})
	assert.Equal(t, 4, n)
}

// eachRecord reads the records of src's shards infos in turn, through
// Open and Next, and calls f with each before it reads the next, as a
// loader's worker decodes a record before it takes another.
func eachRecord(tb testing.TB, src *Source, infos []engine.ShardInfo, f func(engine.Record)) {
	tb.Helper()
	ctx := context.Background()
	for _, info := range infos {
		rr, err := src.Open(ctx, info)
		require.NoError(tb, err)
		for {
			rec, err := rr.Next(ctx)
			if err == io.EOF {
				break
			}
			require.NoError(tb, err)
			f(rec)
		}
		require.NoError(tb, rr.Close())
	}
}

func TestBufferPool(t *testing.T) {
	p := newBufferPool()
	for _, n := range []int{-1, 0, 1, 1<<minBufferShift - 1, 1<<maxBufferShift + 1} {
		assert.Nil(t, p.get(n), "get(%d)", n)
	}
	b := p.get(8<<10 + 1)
	require.Len(t, b, 8<<10+1)
	assert.Equal(t, 16<<10, cap(b))
	p.put(b[1:]) // not a buffer's start
	p.put(make([]byte, 16<<10))
	assert.Len(t, p.out, 1)
	p.put(b[:10]) // its start, with its capacity: taken back...
	p.put(b)      // ...once
	assert.Empty(t, p.out)
	first, _ := p.sizes[14-minBufferShift].Get().(*[]byte) // 16 KiB
	second, _ := p.sizes[14-minBufferShift].Get().(*[]byte)
	assert.False(t, first != nil && second != nil, "a buffer given back twice is handed out twice")

	// A buffer never given back is collected, and its note dropped.
	for range 3000 {
		p.get(8 << 10)
	}
	runtime.GC()
	p.mu.Lock()
	p.dropCollected()
	p.mu.Unlock()
	assert.Less(t, len(p.out), 10)
}
