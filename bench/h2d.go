package main

import (
	"fmt"
	"io"
	"runtime"
	"time"

	"github.com/tensorbatch/tensorbatch/internal/classic"
	"github.com/tensorbatch/tensorbatch/pinned"
)

type h2dRow struct {
	Copy  string  `json:"copy"`
	Bytes int     `json:"bytes"`
	GBps  float64 `json:"gb_per_s"`
}

// h2dTable measures host-to-device bandwidth of one batch's bytes when the
// backend is a GPU: a plain cudaMemcpyAsync loop from pinned memory (the
// limit), a synchronous copy from pageable memory, and the loader itself.
func (r *results) h2dTable(o *options) error {
	sel, err := pinned.Select(o.backend)
	if err != nil {
		return err
	}
	g, ok := sel.Backend.(*pinned.GPU)
	if !ok {
		return nil
	}
	rt := g.Runtime()
	size := o.batch * classic.SampleBytes
	reps := 40
	if o.quick {
		reps = 5
	}
	host, err := g.HostAlloc(size)
	if err != nil {
		return err
	}
	defer g.HostFree(host)
	dev, err := g.Malloc(size)
	if err != nil {
		return err
	}
	defer g.Free(dev)
	s, err := g.NewStream()
	if err != nil {
		return err
	}
	defer rt.StreamDestroy(s)

	t0 := time.Now()
	for range reps {
		if err := rt.CopyToDeviceAsync(dev, host, s); err != nil {
			return err
		}
	}
	if err := rt.StreamSynchronize(s); err != nil {
		return err
	}
	r.h2d = append(r.h2d, h2dRow{"cudaMemcpyAsync loop, pinned (the limit)", size, gbps(size*reps, time.Since(t0))})

	pageable := make([]byte, size)
	t0 = time.Now()
	for range reps {
		if err := rt.CopyToDevice(dev, pageable); err != nil {
			return err
		}
	}
	runtime.KeepAlive(pageable)
	r.h2d = append(r.h2d, h2dRow{"cudaMemcpy, pageable", size, gbps(size*reps, time.Since(t0))})
	return nil
}

func gbps(bytes int, d time.Duration) float64 { return float64(bytes) / d.Seconds() / 1e9 }

func (r *results) h2dMarkdown(w io.Writer) {
	if len(r.h2d) == 0 {
		fmt.Fprintln(w, "\nNo GPU backend is active, so batches stay in host memory and there is no host-to-device table.")
		return
	}
	fmt.Fprintf(w, "\n## Host-to-device bandwidth\n\nOne batch (%d bytes) per copy.\n\n| Copy | GB/s |\n| --- | --- |\n", r.h2d[0].Bytes)
	for _, row := range r.h2d {
		fmt.Fprintf(w, "| %s | %.2f |\n", row.Copy, row.GBps)
	}
	for _, rec := range r.records {
		if rec.Table == "efficiency" && rec.Loader == "tensorbatch" && rec.Workers == r.opts.workers[len(r.opts.workers)-1] {
			fmt.Fprintf(w, "| tensorbatch loader, %d workers, filling included (%s) | %.2f |\n", rec.Workers, rec.Backend,
				rec.BatchesPerS*float64(r.h2d[0].Bytes)/1e9)
		}
	}
}
