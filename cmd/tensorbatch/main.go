// Command tensorbatch is the tool around the loader: it writes, inspects
// and verifies WebDataset and Parquet shards, builds and inspects
// Megatron-LM corpora from text, and measures how fast your own data
// loads here. Install it with
//
//	go install github.com/tensorbatch/tensorbatch/cmd/tensorbatch@latest
//
// Every subcommand has --help with an example. Output is plain text, or
// JSON with --json; long work shows its progress (with its rate and the
// time left) on a terminal, and stops cleanly on Ctrl-C. A subcommand
// exits 0 when it did what it was asked, 1 when it found bad data
// (shards verify) or failed, and 2 on a usage error.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	_ "github.com/tensorbatch/tensorbatch/shards/azure" // az://, azblob://
	_ "github.com/tensorbatch/tensorbatch/shards/gcs"   // gs://
	_ "github.com/tensorbatch/tensorbatch/shards/s3"    // s3://
)

func main() {
	// The first Ctrl-C stops the work cleanly; a second, once the signal
	// is let go, ends the process at once.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	context.AfterFunc(ctx, stop)
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// run runs the command line args and returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	level := slog.LevelWarn // the library's notes (its JPEG decoder, a backend) only with -v
	if slices.Contains(args, "-v") || slices.Contains(args, "--verbose") {
		level = slog.LevelInfo
	}
	defer func(old *slog.Logger) { slog.SetDefault(old) }(slog.Default())
	slog.SetDefault(slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})))
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	var bad *badDataError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &bad):
		return 1 // reported already
	case errors.Is(err, context.Canceled):
		fmt.Fprintln(stderr, "tensorbatch: interrupted")
		return 1
	case isUsage(err):
		fmt.Fprintf(stderr, "tensorbatch: %v\nRun 'tensorbatch --help' for usage.\n", err)
		return 2
	}
	fmt.Fprintf(stderr, "tensorbatch: %v\n", err)
	return 1
}

// newRoot returns the command tree.
func newRoot(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "tensorbatch",
		Short: "Write, inspect and verify shards, build corpora, bench your data",
		Long: `tensorbatch is the tool around the tensorbatch loader: it writes
WebDataset tar and Parquet shards from a folder or a file list, lists,
inspects and verifies shards with the loader's own checks, builds
Megatron-LM corpora from JSONL text, and measures how fast your data
loads on this machine.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.PersistentFlags().Bool("json", false, "print JSON instead of text")
	root.PersistentFlags().BoolP("verbose", "v", false, "log the loader's notes (decoder, backend) too")
	root.AddCommand(newShardsCmd(), newCorpusCmd(), newBenchCmd())
	for _, c := range root.Commands() {
		if c.HasSubCommands() && !c.Runnable() {
			c.Args, c.RunE = cobra.ArbitraryArgs, groupRun
		}
	}
	return root
}

// groupRun runs a command group without its subcommand: its help, or,
// for an unknown subcommand (which cobra would answer with the help and
// exit status 0), a usage error.
func groupRun(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("unknown command %q for %q", args[0], cmd.CommandPath())
	}
	return cmd.Help()
}

// usageError is a command line that does not parse or does not make
// sense; it exits 2.
type usageError struct{ error }

func usagef(format string, args ...any) error { return &usageError{fmt.Errorf(format, args...)} }

// isUsage reports whether err is a usage error: ours, or cobra's
// (unknown flag or command, wrong number of arguments).
func isUsage(err error) bool {
	var u *usageError
	if errors.As(err, &u) {
		return true
	}
	msg := err.Error()
	// cobra's and pflag's own words: "invalid argument" with the quote
	// pflag puts after it, not EINVAL's "mkdir x: invalid argument".
	for _, s := range []string{"unknown flag", "unknown shorthand", "unknown command", "accepts ", "requires at least", `invalid argument "`, "flag needs an argument", "required flag(s)"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// badDataError is bad data found and reported (shards verify): the
// command exits 1 without another message.
type badDataError struct{ n int }

func (e *badDataError) Error() string { return fmt.Sprintf("%d bad samples", e.n) }
