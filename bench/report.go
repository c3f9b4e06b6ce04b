package main

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/gonum/stat"

	"github.com/tensorbatch/tensorbatch/collate"
)

type results struct {
	opts        *options
	machine     string
	peerVersion string
	records     []Record
	h2d         []h2dRow
	tune        []tuneRow
	elapsed     time.Duration
}

func (r *results) add(rec Record, err error) error {
	if err != nil {
		return err
	}
	r.records = append(r.records, rec)
	return nil
}

// family is "tensorbatch" or "pytorch".
func family(loader string) string { return strings.Fields(loader)[0] }

// efficiency divides each no-step run by its plain loop on the same cores.
func (r *results) efficiency() {
	for i, rec := range r.records {
		if rec.Table != "efficiency" {
			continue
		}
		if rec.PlainPerCore > 0 {
			r.records[i].Efficiency = rec.BatchesPerS / (rec.PlainPerCore * float64(cores(rec.Workers)))
		}
	}
}

func (r *results) find(table, fam, method string, workers int, persistent bool) (Record, bool) {
	for _, rec := range r.records {
		if rec.Table == table && family(rec.Loader) == fam && rec.Workers == workers && rec.Persistent == persistent &&
			(method == "" || rec.Method == method || (workers == 0 && rec.Method == "main")) {
			return rec, true
		}
	}
	return Record{}, false
}

// guide is the ROCm guide's table: PyTorch 1.13.1 on an RX 5600 XT, 16 cores.
var guide = map[int][2]float64{0: {12.5, .65}, 1: {18.3, .78}, 2: {24.7, .89}, 4: {31.2, .95}, 8: {32.1, .96}, 16: {31.8, .95}}

func (r *results) markdown(w io.Writer) {
	o := r.opts
	fmt.Fprintf(w, "# tensorbatch bench\n\n")
	fmt.Fprintf(w, "Machine: %s. Workload: %d samples of randn(3,224,224) + label, batch %d, drop last; tensorbatch draws randn with %s (kernels: %s)", r.machine, o.samples, o.batch, o.rng, collate.ActiveKernels())
	if r.peerVersion != "" {
		fmt.Fprintf(w, "; peer: PyTorch %s DataLoader (%s)", r.peerVersion, peerPython)
	}
	fmt.Fprintf(w, ". Took %.0f s.\n\n", r.elapsed.Seconds())

	stepMS := float64(o.step) / 1e6
	fmt.Fprintf(w, "## Workers vs throughput\n\nTraining step simulated by a %.0f ms wait per batch (a GPU step leaves the CPU free); util = step time / wall time; persistent workers, steady epoch (the second). The guide's figures are from another machine (PyTorch 1.13.1, RX 5600 XT, 16 cores), for shape only.\n\n", stepMS)
	fmt.Fprintln(w, "| Workers | tensorbatch batches/s | util | PyTorch fork batches/s | util | tensorbatch ÷ PyTorch | guide batches/s | guide util |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- | --- | --- |")
	for _, wk := range o.workers {
		ours, okO := r.find("workers", "tensorbatch", "", wk, true)
		theirs, okT := r.find("workers", "pytorch", "fork", wk, true)
		g, okG := guide[wk]
		fmt.Fprintf(w, "| %d | %s | %s | %s | %s | %s | %s | %s |\n", wk,
			num(okO, ours.BatchesPerS, 1), pct(okO, ours.Util), num(okT, theirs.BatchesPerS, 1), pct(okT, theirs.Util),
			ratio(okO && okT, ours.BatchesPerS, theirs.BatchesPerS), num(okG, g[0], 1), pct(okG, g[1]))
	}

	fmt.Fprintf(w, "\n## Persistent vs per-epoch workers\n\n%d workers, %d epochs, same step. Epoch times include worker start-up and shutdown; \"steady\" is first to last batch of the epochs after the first.\n\n", o.persistW, o.epochs)
	fmt.Fprintln(w, "| Loader | start method | persistent | Epoch 1 | Epoch 2+ | steady 2+ | first batch | peak RSS | Epoch 2+ vs tensorbatch |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
	for _, rec := range r.records {
		if rec.Table != "persistence" {
			continue
		}
		ours, ok := r.find("persistence", "tensorbatch", "", rec.Workers, rec.Persistent)
		vs := "—"
		if family(rec.Loader) == "pytorch" && ok {
			vs = fmt.Sprintf("%.2f×", later(rec, false)/later(ours, false))
		}
		fmt.Fprintf(w, "| %s | %s | %v | %.2f s | %.2f s | %.2f s | %.3f s | %.0f MB | %s |\n", family(rec.Loader), rec.Method, rec.Persistent,
			rec.Epochs[0].WallS, later(rec, false), later(rec, true), rec.FirstBatchS, rec.PeakRSSMB, vs)
	}

	fmt.Fprintf(w, "\n## Engine efficiency\n\nNo step: the loader's batches/s ÷ the same per-sample work in a plain loop with no loader (its one-core rate, measured just before and just after, × the cores the workers can use: at most %d here). It isolates what the loader itself costs (copies, IPC, page faults, scheduling); the limit is 1.0, and this machine's noise is several percent either way.\n\n", cores(1<<30))
	fmt.Fprintln(w, "| Workers | tensorbatch batches/s | plain × cores | efficiency | bytes copied/batch | PyTorch fork batches/s | plain × cores | efficiency | bytes copied/batch |")
	fmt.Fprintln(w, "| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
	for _, wk := range o.workers {
		ours, okO := r.find("efficiency", "tensorbatch", "", wk, true)
		theirs, okT := r.find("efficiency", "pytorch", "fork", wk, true)
		c := float64(cores(wk))
		fmt.Fprintf(w, "| %d | %s | %s | %s | %s | %s | %s | %s | %s |\n", wk,
			num(okO, ours.BatchesPerS, 1), num(okO, ours.PlainPerCore*c, 1), num(okO, ours.Efficiency, 2), num(okO, ours.CopiedPerBat, 0),
			num(okT, theirs.BatchesPerS, 1), num(okT, theirs.PlainPerCore*c, 1), num(okT, theirs.Efficiency, 2), num(okT, theirs.CopiedPerBat, 0))
	}
	fmt.Fprintln(w, "\nPyTorch's bytes copied are counted from DataLoader's code path (collate's stack, plus pin_memory's copy when CUDA is present), not measured.")
	r.h2dMarkdown(w)
	r.tuneMarkdown(w)
}

// later is the mean wall (or steady) time of the epochs after the first.
func later(r Record, steady bool) float64 {
	var s []float64
	for _, e := range r.Epochs[1:] {
		if steady {
			s = append(s, e.SteadyS)
		} else {
			s = append(s, e.WallS)
		}
	}
	return stat.Mean(s, nil)
}

func num(ok bool, v float64, prec int) string {
	if !ok {
		return "—"
	}
	return strconv.FormatFloat(v, 'f', prec, 64)
}

func pct(ok bool, v float64) string {
	if !ok {
		return "—"
	}
	return fmt.Sprintf("%.0f%%", 100*v)
}

func ratio(ok bool, a, b float64) string {
	if !ok || b == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f×", a/b)
}

// write saves the records as JSON and CSV, and the plots, under dir.
func (r *results) write(dir string, w io.Writer) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	doc := map[string]any{"machine": r.machine, "samples": r.opts.samples, "batch": r.opts.batch,
		"step_ms": float64(r.opts.step) / 1e6, "peer": r.peerVersion,
		"records": r.records, "h2d": r.h2d, "autotune": r.tune, "rng": r.opts.rng, "kernels": collate.ActiveKernels().String()}
	js, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), js, 0o644); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, "results.csv"))
	if err != nil {
		return err
	}
	c := csv.NewWriter(f)
	c.Write([]string{"table", "loader", "method", "workers", "persistent", "step_ms", "backend", "batches_per_s", "util",
		"first_batch_s", "epoch1_s", "epoch2plus_s", "peak_rss_mb", "copied_bytes_per_batch", "efficiency"})
	for _, rec := range r.records {
		c.Write([]string{rec.Table, rec.Loader, rec.Method, strconv.Itoa(rec.Workers), strconv.FormatBool(rec.Persistent),
			ff(rec.StepMS), rec.Backend, ff(rec.BatchesPerS), ff(rec.Util), ff(rec.FirstBatchS), ff(rec.Epochs[0].WallS),
			ff(later(rec, false)), ff(rec.PeakRSSMB), ff(rec.CopiedPerBat), ff(rec.Efficiency)})
	}
	c.Flush()
	if err := errors.Join(c.Error(), f.Close()); err != nil {
		return err
	}
	files := []string{"results.json", "results.csv"}
	if !r.opts.noPlots {
		plots, err := r.plots(dir)
		if err != nil {
			return err
		}
		files = append(files, plots...)
	}
	fmt.Fprintf(w, "\nWrote %s under %s.\n", strings.Join(files, ", "), dir)
	return nil
}

func ff(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }
