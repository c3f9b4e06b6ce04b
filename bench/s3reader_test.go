package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/internal/s3test"
)

// TestS3ReaderRows runs issue 24's rows at -quick size: every row has a
// ratio a round, and the cache's later epochs make no request. (No
// figure is checked: this machine is shared.)
func TestS3ReaderRows(t *testing.T) {
	if testing.Short() {
		t.Skip("the bench's S3 rows on an emulator: slow; go test without -short runs it")
	}
	if _, err := s3test.Binary(); err != nil {
		t.Skipf("no versitygw: %v", err)
	}
	o, err := parseFlags([]string{"-quick"})
	require.NoError(t, err)
	var sb s3ReaderBench
	require.NoError(t, sb.run(o))
	require.Len(t, sb.rows, 3+2*len(sb.recordSizes)) // raw copy, a pair of raw records rows a size, JPEG, cache
	for _, r := range sb.rows {
		assert.Len(t, r.Ratios, sb.rounds, r.Row)
		assert.Positive(t, r.Median, r.Row)
	}
	assert.Positive(t, sb.cacheFill)
	assert.Zero(t, sb.cacheLater)
	var out bytes.Buffer
	dir := t.TempDir()
	require.NoError(t, sb.report(&out, dir))
	for _, want := range []string{"## S3 reader against a bare SDK loop", "| raw copy (64 KiB records) | shards.Opener.Open + io.Copy to io.Discard | GetObject + io.Copy to io.Discard |",
		"| raw records (4 KiB) | shards.Source, DecodeFunc calls shards.Release |", "| raw records (64 KiB) | the same, without shards.Release |", "| JPEG 64² decode |", "| epoch 2 from the cache", "≥ 0.90", "≥ 0.95", "0 in the epochs after it (target 0)"} {
		assert.Contains(t, out.String(), want)
	}
	_, err = os.Stat(filepath.Join(dir, "s3reader.json"))
	assert.NoError(t, err)
}

// TestS3ReaderRowsSkipWithoutVersitygw: without the server the section
// says why.
func TestS3ReaderRowsSkipWithoutVersitygw(t *testing.T) {
	sb := s3ReaderBench{skipped: "versitygw is not installed"}
	var out bytes.Buffer
	require.NoError(t, sb.report(&out, t.TempDir()))
	assert.Contains(t, out.String(), "> Skipped: versitygw is not installed.")
}
