package main

import (
	"fmt"
	"path/filepath"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// plots draws throughput and util against workers, and epoch times, each
// as PNG and SVG; it returns the file names.
func (r *results) plots(dir string) ([]string, error) {
	var files []string
	for _, spec := range []struct {
		name, y string
		value   func(Record) float64
		guide   func(w int) float64
	}{
		{"throughput", "batches/s", func(r Record) float64 { return r.BatchesPerS }, func(w int) float64 { return guide[w][0] }},
		{"util", "util (step time / wall time)", func(r Record) float64 { return r.Util }, func(w int) float64 { return guide[w][1] }},
	} {
		p := plot.New()
		p.Title.Text = fmt.Sprintf("Workers vs %s (step %v per batch)", spec.name, r.opts.step)
		p.X.Label.Text, p.Y.Label.Text = "workers", spec.y
		var lines []any
		for _, fam := range []string{"tensorbatch", "pytorch"} {
			var pts plotter.XYs
			label := ""
			for _, rec := range r.records {
				if rec.Table == "workers" && family(rec.Loader) == fam {
					pts = append(pts, plotter.XY{X: float64(rec.Workers), Y: spec.value(rec)})
					label = rec.label()
					if fam == "pytorch" && rec.Workers > 0 {
						label = "pytorch " + rec.Method
					}
				}
			}
			if len(pts) > 0 {
				lines = append(lines, label, pts)
			}
		}
		var g plotter.XYs
		for _, w := range r.opts.workers {
			if _, ok := guide[w]; ok {
				g = append(g, plotter.XY{X: float64(w), Y: spec.guide(w)})
			}
		}
		lines = append(lines, "guide (PyTorch, other machine)", g)
		if err := plotutil.AddLinePoints(p, lines...); err != nil {
			return nil, err
		}
		out, err := save(p, dir, spec.name)
		if err != nil {
			return nil, err
		}
		files = append(files, out...)
	}

	p := plot.New()
	p.Title.Text = fmt.Sprintf("Epoch wall time, %d workers", r.opts.persistW)
	p.X.Label.Text, p.Y.Label.Text = "epoch", "seconds"
	var lines []any
	for _, rec := range r.records {
		if rec.Table != "persistence" {
			continue
		}
		var pts plotter.XYs
		for i, e := range rec.Epochs {
			pts = append(pts, plotter.XY{X: float64(i + 1), Y: e.WallS})
		}
		lines = append(lines, fmt.Sprintf("%s persistent=%v", rec.label(), rec.Persistent), pts)
	}
	if err := plotutil.AddLinePoints(p, lines...); err != nil {
		return nil, err
	}
	out, err := save(p, dir, "epochs")
	if err != nil {
		return nil, err
	}
	return slices.Concat(files, out), nil
}

func save(p *plot.Plot, dir, name string) ([]string, error) {
	p.Legend.Top = true
	var files []string
	for _, ext := range []string{"png", "svg"} {
		f := name + "." + ext
		if err := p.Save(7*vg.Inch, 4.5*vg.Inch, filepath.Join(dir, f)); err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	return files, nil
}
