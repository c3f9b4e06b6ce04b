package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/collate"
	"github.com/tensorbatch/tensorbatch/corpus"
)

// bench loads each kind of data (an image folder, shards, a Megatron
// corpus, a token file) at the worker counts asked and with autotune,
// and reports a row each with its rate, CPU a sample and data-bound
// fraction; --plot draws a PNG.
func TestBenchEachKindOfData(t *testing.T) {
	ctx := context.Background()
	root, _ := imageFolder(t, 2, 10)
	shardsDir := t.TempDir()
	code, _, stderr := tb(t, ctx, "shards", "write", root, "--out", shardsDir, "--shard-size", "20KiB")
	require.Equal(t, 0, code, stderr)
	docs := make([][]int64, 50)
	for i := range docs {
		docs[i] = make([]int64, 10+i*7)
		for j := range docs[i] {
			docs[i][j] = int64(i + j)
		}
	}
	prefix := filepath.Join(t.TempDir(), "web_text_document")
	require.NoError(t, corpus.WriteMegatron(prefix, collate.Uint16, docs))
	tokens := filepath.Join(t.TempDir(), "train.bin")
	buf := make([]byte, 2*5000)
	for i := range 5000 {
		binary.LittleEndian.PutUint16(buf[2*i:], uint16(i%50000))
	}
	require.NoError(t, os.WriteFile(tokens, buf, 0o644))

	for _, tc := range []struct {
		data, kind string
		args       []string
	}{
		{root, "images", []string{"--transform", "eval32"}},
		{shardsDir + "/", "shards", []string{"--transform", "train32", "--mode", "fast"}},
		{prefix, "megatron", []string{"--seq-len", "16"}},
		{tokens, "tokens", []string{"--seq-len", "64"}},
	} {
		png := filepath.Join(t.TempDir(), "workers.png")
		args := append([]string{"bench", tc.data, "--workers", "0,2", "--batch-size", "2", "--batches", "4", "--plot", png, "--json"}, tc.args...)
		code, stdout, stderr := tb(t, ctx, args...)
		require.Equal(t, 0, code, "%s: %s", tc.kind, stderr)
		var out struct {
			Kind string
			Rows []benchRow
		}
		require.NoError(t, json.Unmarshal([]byte(stdout), &out), stdout)
		assert.Equal(t, tc.kind, out.Kind)
		require.Len(t, out.Rows, 3, tc.kind)
		for i, w := range []string{"0", "2", "auto"} {
			r := out.Rows[i]
			assert.Equal(t, w, r.Workers)
			assert.Equal(t, 4, r.Batches)
			assert.Positive(t, r.SamplesPerS, "%s %s", tc.kind, w)
			assert.InDelta(t, 0.5, r.DataBound, 0.5)
			if tc.kind == "megatron" || tc.kind == "tokens" {
				assert.Positive(t, r.TokensPerS)
			}
		}
		head := make([]byte, 8)
		f, err := os.Open(png)
		require.NoError(t, err)
		_, err = f.Read(head)
		f.Close()
		require.NoError(t, err)
		assert.Equal(t, "\x89PNG\r\n\x1a\n", string(head), "%s: --plot writes a PNG", tc.kind)
	}
	code, _, stderr = tb(t, ctx, "bench", root, "--transform", "crop224")
	assert.Equal(t, 2, code, stderr)
}

// bench reads a local folder of shards as shards and an ImageFolder as
// images, with or without the "/" a shell's completion adds, and a
// Megatron corpus named by its .bin as the corpus, not a token file; a
// --batches, --batch-size or --seq-len that cannot be run is a usage
// error, not a row of NaNs or a JSON encoding error.
func TestBenchTellsDataApart(t *testing.T) {
	ctx := context.Background()
	root, _ := imageFolder(t, 2, 6)
	shardsDir := t.TempDir()
	code, _, stderr := tb(t, ctx, "shards", "write", root, "--out", shardsDir, "--shard-size", "20KiB")
	require.Equal(t, 0, code, stderr)
	prefix := filepath.Join(t.TempDir(), "web_text_document")
	docs := make([][]int64, 20)
	for i := range docs {
		docs[i] = make([]int64, 40+i)
	}
	require.NoError(t, corpus.WriteMegatron(prefix, collate.Int32, docs))
	run := []string{"--workers", "1", "--autotune=false", "--batch-size", "2", "--batches", "2", "--transform", "eval32", "--seq-len", "8", "--json"}
	for data, kind := range map[string]string{
		root: "images", root + "/": "images",
		shardsDir: "shards", shardsDir + "/": "shards",
		prefix: "megatron", prefix + ".bin": "megatron",
	} {
		code, stdout, stderr := tb(t, ctx, append([]string{"bench", data}, run...)...)
		require.Equal(t, 0, code, "%s: %s", data, stderr)
		var out struct{ Kind string }
		require.NoError(t, json.Unmarshal([]byte(stdout), &out))
		assert.Equal(t, kind, out.Kind, data)
	}
	for _, flag := range [][]string{{"--batches", "0"}, {"--batches", "-1"}, {"--batch-size", "-1"}, {"--seq-len", "0"}} {
		code, stdout, stderr := tb(t, ctx, append(append([]string{"bench", root}, run...), flag...)...)
		assert.Equal(t, 2, code, "%v: %s%s", flag, stdout, stderr)
		assert.Contains(t, stderr, flag[0])
	}
}
