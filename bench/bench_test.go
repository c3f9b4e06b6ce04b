package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/tensorbatch/tensorbatch/internal/fakecudart"
	"github.com/tensorbatch/tensorbatch/pinned"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// tiny is a run small enough for a unit test.
func tiny(t *testing.T, args ...string) *options {
	o, err := parseFlags(append([]string{"-samples", "64", "-workers", "0,2", "-epochs", "2", "-step", "1ms",
		"-persist-workers", "2", "-methods", "fork", "-no-images", "-no-shards", "-no-autotune", "-out", t.TempDir()}, args...))
	require.NoError(t, err)
	o.progressOut = &bytes.Buffer{}
	return o
}

func TestBenchWritesTablesCSVJSONAndPlots(t *testing.T) {
	o := tiny(t, "-peer", "off", "-backend", "cpu")
	var out bytes.Buffer
	require.NoError(t, run(o, &out))
	md := out.String()
	for _, want := range []string{"## Workers vs throughput", "| 0 | ", "| 2 | ", "## Persistent vs per-epoch workers",
		"| tensorbatch | goroutines | false |", "| tensorbatch | goroutines | true |", "## Engine efficiency",
		"no host-to-device table"} {
		assert.Contains(t, md, want)
	}
	// 2 workers-table rows, 2 efficiency rows, 2 persistence rows.
	f, err := os.Open(filepath.Join(o.out, "results.csv"))
	require.NoError(t, err)
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	require.NoError(t, err)
	require.Len(t, rows, 7)
	assert.Equal(t, "table", rows[0][0])

	var doc struct {
		Records []Record `json:"records"`
	}
	js, err := os.ReadFile(filepath.Join(o.out, "results.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(js, &doc))
	require.Len(t, doc.Records, 6)
	for _, r := range doc.Records {
		assert.Equal(t, "tensorbatch", r.Loader)
		assert.Positive(t, r.BatchesPerS, "%+v", r)
		assert.Equal(t, 2, r.Epochs[0].Batches)
		assert.Zero(t, r.CopiedPerBat, "the Fill path copies nothing")
		assert.Positive(t, r.PeakRSSMB)
		if r.Table == "efficiency" {
			assert.Positive(t, r.Efficiency)
			assert.Positive(t, r.PlainPerCore)
		}
	}
	for _, name := range []string{"throughput", "util", "epochs"} {
		png, err := os.ReadFile(filepath.Join(o.out, name+".png"))
		require.NoError(t, err)
		assert.True(t, bytes.HasPrefix(png, []byte("\x89PNG")), name)
		svg, err := os.ReadFile(filepath.Join(o.out, name+".svg"))
		require.NoError(t, err)
		assert.Contains(t, string(svg), "<svg")
	}
}

func TestBenchHostToDeviceTableOnAGPUBackend(t *testing.T) {
	if testing.Short() {
		t.Skip("the bench's host-to-device table: slow; go test without -short runs it")
	}
	t.Setenv(pinned.EnvCUDALib, fakecudart.Path(t))
	t.Setenv("TB_FAKE_COPY_DELAY_US", "0")
	o := tiny(t, "-peer", "off", "-backend", "cuda", "-no-plots")
	var out bytes.Buffer
	require.NoError(t, run(o, &out))
	md := out.String()
	assert.Contains(t, md, "## Host-to-device bandwidth")
	assert.Contains(t, md, "| cudaMemcpyAsync loop, pinned (the limit) |")
	assert.Contains(t, md, "| cudaMemcpy, pageable |")
	assert.Contains(t, md, "| tensorbatch loader, 2 workers, filling included (cuda) |")
}

func TestBenchSideBySideWithPyTorch(t *testing.T) {
	if testing.Short() {
		t.Skip("the bench beside PyTorch: slow; go test without -short runs it")
	}
	if _, err := findPeer(); err != nil {
		t.Skipf("no PyTorch peer (%v): scripts/install-deps.sh installs python3-torch", err)
	}
	o := tiny(t, "-peer", "auto", "-backend", "cpu", "-no-plots", "-workers", "0,1")
	var out bytes.Buffer
	require.NoError(t, run(o, &out))
	md := out.String()
	assert.Regexp(t, `\| 1 \| [0-9.]+ \| [0-9]+% \| [0-9.]+ \| [0-9]+% \| [0-9.]+× \|`, md, "both loaders with the ratio")
	assert.Contains(t, md, "| pytorch | fork | false |")
	assert.Contains(t, md, "| pytorch | fork | true |")
	assert.Regexp(t, `\| 1 \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| 0 \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| 19267840 \|`, md, "efficiency of both: a batch is 32 × 602120 bytes, stacked once")
}

func TestBenchWithoutPeerSaysHowToGetIt(t *testing.T) {
	if testing.Short() {
		t.Skip("a bench run: slow; go test without -short runs it")
	}
	o := tiny(t, "-peer", "auto", "-backend", "cpu", "-no-plots", "-workers", "0")
	old := peerScript
	peerScript = "/nonexistent/peer.py"
	defer func() { peerScript = old }()
	var out bytes.Buffer
	require.NoError(t, run(o, &out))
	assert.Contains(t, out.String(), "PyTorch is not available")
	assert.Contains(t, out.String(), "scripts/install-deps.sh")
	assert.NotContains(t, out.String(), "| pytorch")
}

func TestBenchFlags(t *testing.T) {
	for args, msg := range map[string]string{
		"-peer maybe":  `-peer "maybe"`,
		"-workers 1,x": `"x" is not a worker count`,
		"-samples 10":  "-samples 10 must hold at least one -batch of 32",
		"-epochs 1":    "-epochs 1",
	} {
		_, err := parseFlags(strings.Fields(args))
		assert.ErrorContains(t, err, msg)
	}
	o, err := parseFlags([]string{"-quick"})
	require.NoError(t, err)
	assert.Equal(t, []int{0, 1, 2}, o.workers)
	assert.Equal(t, 5*time.Millisecond, o.step)
}

func TestBenchAutotuneTable(t *testing.T) {
	o := tiny(t, "-peer", "off", "-backend", "cpu")
	o.quick = true // the small grid
	res := &results{opts: o}
	require.NoError(t, res.autotuneTable(o))
	require.Len(t, res.tune, 6, "3 settings × 2 workloads")
	var out bytes.Buffer
	res.tuneMarkdown(&out)
	md := out.String()
	assert.Contains(t, md, "## Autotune")
	assert.Regexp(t, `\| seed \(philox randn\) \| workers=[0-9] prefetch=[0-9] \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| [0-9]+ workers, window [0-9]+ \|`, md)
	for _, r := range res.tune {
		assert.Positive(t, r.BatchesPerS, "%+v", r)
	}
}
