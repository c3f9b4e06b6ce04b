package main

import (
	"encoding/json"
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"
)

// jsonOut reports whether the command prints JSON (--json).
func jsonOut(cmd *cobra.Command) bool {
	v, _ := cmd.Flags().GetBool("json")
	return v
}

// emit prints v as indented JSON with --json, else text(w) prints it.
func emit(cmd *cobra.Command, v any, text func(w io.Writer) error) error {
	if jsonOut(cmd) {
		enc := json.NewEncoder(cmd.OutOrStdout())
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	return text(cmd.OutOrStdout())
}

// progress is a progress bar on the command's standard error: a count
// with its rate and the time left, drawn only when standard error is a
// terminal and the output is not JSON (a pipe or a CI log gets none).
type progress struct{ bar *progressbar.ProgressBar }

// newProgress returns a bar of total units (-1: unknown) called what
// ("images", "bytes"); bytes shows byte sizes.
func newProgress(cmd *cobra.Command, total int64, what string, bytes bool) *progress {
	f, ok := cmd.ErrOrStderr().(*os.File)
	if !ok || jsonOut(cmd) || !term.IsTerminal(int(f.Fd())) {
		return &progress{}
	}
	opts := []progressbar.Option{
		progressbar.OptionSetWriter(f),
		progressbar.OptionSetDescription(what),
		progressbar.OptionShowCount(),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionThrottle(100 * time.Millisecond),
		progressbar.OptionClearOnFinish(),
	}
	if bytes { // sizes and a rate in bytes, once
		opts = append(opts, progressbar.OptionShowBytes(true))
	} else {
		opts = append(opts, progressbar.OptionShowIts(), progressbar.OptionSetItsString(what))
	}
	return &progress{progressbar.NewOptions64(total, opts...)}
}

// describe sets the text before the bar.
func (p *progress) describe(s string) {
	if p.bar != nil {
		p.bar.Describe(s)
	}
}

// add counts n more units done.
func (p *progress) add(n int64) {
	if p.bar != nil {
		p.bar.Add64(n)
	}
}

// done ends the bar.
func (p *progress) done() {
	if p.bar != nil {
		p.bar.Finish()
	}
}
