package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The image rows on a few JPEGs made by the script: both tables, the
// JSON, CSV and plot. Skipped where Debian's python3-pil or
// mate-backgrounds are missing.
func TestImageRows(t *testing.T) {
	if testing.Short() {
		t.Skip("the bench's image rows: slow; go test without -short runs it")
	}
	dir := t.TempDir()
	ib := &imageBench{}
	imgOpts = imageOpts{count: 70, workers: "0,2", rounds: 1}
	defer func() { imgOpts = imageOpts{} }()
	o := &options{out: dir, peer: "off"}
	require.NoError(t, ib.run(o, nil))
	var out bytes.Buffer
	require.NoError(t, ib.report(&out, dir))
	if ib.skipped != "" {
		t.Skip(ib.skipped)
	}
	md := out.String()
	for _, want := range []string{"## Images: real JPEGs to the batch", "| tensorbatch train transform, Fast |", "| tensorbatch train transform, Exact |",
		"| tensorbatch eval transform, Fast |", "| tensorbatch eval transform, Exact |",
		"| 0 | ", "| 2 | "} {
		assert.Contains(t, md, want)
	}
	if strings.Contains(md, "TurboJPEG decode only (C) | 0 |") {
		t.Log("TurboJPEG not loaded: no baseline")
	} else {
		assert.Contains(t, md, "tensorbatch train transform, Fast ÷ TurboJPEG decode only (C) |")
	}
	js, err := os.ReadFile(filepath.Join(dir, "images.json"))
	require.NoError(t, err)
	var doc struct {
		Loaders []imageLoaderRow `json:"loaders"`
	}
	require.NoError(t, json.Unmarshal(js, &doc))
	require.Len(t, doc.Loaders, 2)
	for _, r := range doc.Loaders {
		assert.Positive(t, r.ImagesPerS)
	}
	png, err := os.ReadFile(filepath.Join(dir, "images.png"))
	require.NoError(t, err)
	assert.True(t, bytes.HasPrefix(png, []byte("\x89PNG")))
}

// TestImageRowsFull runs only the image rows of make bench, at full size,
// and prints their tables: TB_IMAGE_BENCH=1 go test -run ImageRowsFull -v
// -timeout 30m ./bench/ (TB_IMAGE_COUNT, TB_IMAGE_ROUNDS, TB_HIRES_COUNT
// change the size). The source rows and the high-resolution set (issue
// 23) follow the ImageNet-like rows; TB_IMAGE_ONLY=sources or hires runs
// only that part, TB_IMAGE_ONLY=percore only the ImageNet-like per-core
// rows. TB_IMAGE_DIR names an ImageNet-like folder to use instead of
// making one; TB_NO_TORCH=1 leaves out the Python peer.
func TestImageRowsFull(t *testing.T) {
	if os.Getenv("TB_IMAGE_BENCH") == "" {
		t.Skip("set TB_IMAGE_BENCH=1")
	}
	imgOpts = imageOpts{count: 1000, hiresCount: 200, workers: "0,1,2,4", rounds: 3}
	if n, err := strconv.Atoi(os.Getenv("TB_IMAGE_COUNT")); err == nil {
		imgOpts.count = n
	}
	if n, err := strconv.Atoi(os.Getenv("TB_HIRES_COUNT")); err == nil {
		imgOpts.hiresCount = n
	}
	if n, err := strconv.Atoi(os.Getenv("TB_IMAGE_ROUNDS")); err == nil {
		imgOpts.rounds = n
	}
	imgOpts.dir = os.Getenv("TB_IMAGE_DIR") // an ImageFolder made already: its images, whatever TB_IMAGE_COUNT says
	defer func() { imgOpts = imageOpts{} }()
	p, err := findPeer()
	if err != nil {
		t.Logf("no PyTorch: %v", err)
	}
	o := &options{out: filepath.Join(repoRoot(), "bench", "results"), peer: "auto"}
	if p == nil || os.Getenv("TB_NO_TORCH") == "1" {
		o.peer, p = "off", nil
	}
	only := os.Getenv("TB_IMAGE_ONLY")
	ib := &imageBench{onlyDir: only == "sources" || only == "hires"}
	require.NoError(t, ib.run(o, p))
	var out bytes.Buffer
	require.NoError(t, ib.report(&out, o.out))
	if only != "hires" && only != "percore" {
		var sb sourceBench
		require.NoError(t, sb.run(o, p, ib))
		require.NoError(t, sb.report(&out, o.out))
	}
	if only != "sources" && only != "percore" {
		hb := &imageBench{hires: true}
		require.NoError(t, hb.run(o, p))
		require.NoError(t, hb.report(&out, o.out))
	}
	fmt.Println(out.String())
}

// The rows of issue 23 on a few JPEGs: the folder, tar and Parquet
// shards (and S3 where versitygw is installed) through one Pipeline,
// their ratios, the tar loader table, and the high-resolution set's
// per-core rows. Skipped where the script cannot make the folders.
func TestSourceAndHiresRows(t *testing.T) {
	if testing.Short() {
		t.Skip("the bench's source and high-resolution rows: slow; go test without -short runs it")
	}
	dir := t.TempDir()
	imgOpts = imageOpts{count: 40, hiresCount: 10, workers: "0,2", rounds: 1}
	defer func() { imgOpts = imageOpts{} }()
	o := &options{out: dir, peer: "off", quick: true}
	ib := &imageBench{}
	require.NoError(t, ib.run(o, nil))
	if ib.skipped != "" {
		t.Skip(ib.skipped)
	}
	var sb sourceBench
	require.NoError(t, sb.run(o, nil, ib))
	hb := &imageBench{hires: true}
	require.NoError(t, hb.run(o, nil))
	var out bytes.Buffer
	require.NoError(t, ib.report(&out, dir))
	require.NoError(t, sb.report(&out, dir))
	require.NoError(t, hb.report(&out, dir))
	md := out.String()
	t.Log(md)
	for _, want := range []string{"## Images from any source (issue 23)", "| ImageFolder (files on local disk) |",
		"| tar shards, local disk |", "| Parquet shards (Hugging Face layout), local disk |",
		"| tar shards, local ÷ folder |", "| Parquet shards, local ÷ folder |",
		"| " + bytesRow + " |", "## Images: high-resolution JPEGs, per core (issue 23)", "| 2 | "} {
		assert.Contains(t, md, want)
	}
	for _, r := range sb.rows {
		assert.Positive(t, r.ImagesPerS, r.Source)
	}
	js, err := os.ReadFile(filepath.Join(dir, "sources.json"))
	require.NoError(t, err)
	var doc struct {
		Ratios []sourceRatio `json:"ratios"`
	}
	require.NoError(t, json.Unmarshal(js, &doc))
	require.GreaterOrEqual(t, len(doc.Ratios), 2)
	_, err = os.ReadFile(filepath.Join(dir, "hires.json"))
	require.NoError(t, err)
}
