package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"

	"github.com/tensorbatch/tensorbatch/internal/classic"
)

// peer runs scripts/peer_dataloader.py under Debian's python3, where
// python3-torch lives (a pyenv python earlier on PATH would lack it);
// TB_PYTHON names another interpreter (a GPU machine's own PyTorch).
type peer struct {
	python, script string
	version        string
}

var peerPython = cmp.Or(os.Getenv("TB_PYTHON"), "/usr/bin/python3")

// peerScript is the peer's path; empty means scripts/ of this repository.
var peerScript = ""

// findPeer reports whether PyTorch can be imported, and why not.
func findPeer() (*peer, error) {
	script := peerScript
	if script == "" {
		script = filepath.Join(repoRoot(), "scripts", "peer_dataloader.py")
	}
	if _, err := os.Stat(script); err != nil {
		return nil, err
	}
	// The first import after boot is slow (cold caches); pay it here, outside
	// every measurement.
	out, err := exec.Command(peerPython, "-c", "import torch; print(torch.__version__)").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("%s cannot import torch: %v: %s", peerPython, err, bytes.TrimSpace(out))
	}
	return &peer{python: peerPython, script: script, version: string(bytes.TrimSpace(out))}, nil
}

// repoRoot is the module root: the bench runs from it (make bench) or
// from its source tree.
func repoRoot() string {
	if _, err := os.Stat("scripts/peer_dataloader.py"); err == nil {
		return "."
	}
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..")
}

type peerOut struct {
	Record
	Version string  `json:"version"`
	Pin     bool    `json:"pin_memory"`
	Python  string  `json:"python"`
	Plain   bool    `json:"plain"`
	Rate    float64 `json:"batches_per_s"`
}

func (p *peer) call(args ...string) (peerOut, error) {
	cmd := exec.Command(p.python, append([]string{p.script}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return peerOut{}, fmt.Errorf("peer %v: %v: %s", args, err, stderr.Bytes())
	}
	var out peerOut
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		return out, fmt.Errorf("peer %v: %v: %q", args, err, stdout.Bytes())
	}
	return out, nil
}

// run runs one DataLoader configuration in its own process.
func (p *peer) run(o *options, table, method string, workers int, persistent bool, epochs int, stepMS float64) (Record, error) {
	out, err := p.call("--samples", strconv.Itoa(o.samples), "--batch", strconv.Itoa(o.batch),
		"--workers", strconv.Itoa(workers), "--method", method, "--persistent", strconv.Itoa(b2i(persistent)),
		"--epochs", strconv.Itoa(epochs), "--step", strconv.FormatFloat(stepMS/1000, 'f', -1, 64))
	if err != nil {
		return Record{}, err
	}
	r := out.Record
	r.Table, r.Loader, r.StepMS, r.Backend = table, "pytorch "+out.Version, stepMS, "cpu"
	if out.Pin {
		r.Backend = "cuda"
	}
	// Counted from DataLoader's code path: default_collate stacks the
	// samples into the batch (one copy of it, into shared memory when
	// workers > 0), and pin_memory copies the batch again when active.
	batchBytes := float64(o.batch * classic.SampleBytes)
	r.CopiedPerBat = batchBytes * float64(1+b2i(out.Pin))
	r.Note = "copied bytes counted from the code path, not measured"
	r.summarize()
	return r, nil
}

// plainRate is the same per-sample work in a plain loop on one core.
func (p *peer) plainRate(o *options) (float64, error) {
	out, err := p.call("--plain", "--samples", strconv.Itoa(o.samples/o.batch*o.batch), "--batch", strconv.Itoa(o.batch))
	if err != nil {
		return 0, err
	}
	if !out.Plain || out.Rate <= 0 {
		return 0, errors.New("peer: no plain-loop rate")
	}
	return out.Rate, nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
