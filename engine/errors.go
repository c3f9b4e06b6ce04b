package engine

import (
	"context"
	"errors"
	"fmt"
)

// Errors that callers test with errors.Is.
var (
	// ErrClosed is returned by an epoch of a closed Loader.
	ErrClosed = errors.New("engine: loader closed")
	// ErrBusy is returned when an epoch starts while another is running.
	ErrBusy = errors.New("engine: another epoch of this loader is running")
	// ErrTimeout is wrapped by the SampleError of a sample whose Fill ran
	// longer than Config.Timeout.
	ErrTimeout = errors.New("engine: sample timed out")
	// ErrGoexit is wrapped by the SampleError of a sample whose Fill
	// called runtime.Goexit (t.FailNow, log.Fatal-like helpers). The
	// rest of that batch is not filled, and the lost worker is replaced at
	// the next epoch.
	ErrGoexit = errors.New("engine: Fill called runtime.Goexit")
)

// SampleError is the error of one sample: Fill returned an error, panicked
// or ran past Config.Timeout.
type SampleError struct {
	Index  int    // dataset index of the sample
	Epoch  int    // epoch it was loaded in
	Worker int    // worker that ran Fill; -1 for the consumer's goroutine (Workers 0)
	Err    error  // what went wrong
	Stack  []byte // the goroutine's stack when Fill panicked; nil otherwise
}

func (e *SampleError) Error() string {
	who := fmt.Sprintf("worker %d", e.Worker)
	if e.Worker < 0 {
		who = "consumer goroutine"
	}
	hint := ""
	if badData(e.Err) {
		hint = sampleHint
	}
	return fmt.Sprintf("engine: sample %d (epoch %d, %s): %v%s", e.Index, e.Epoch, who, e.Err, hint)
}

// sampleHint ends the message of a SampleError whose sample's data may
// be bad (a corrupt file, a missing member): what to do about it.
const sampleHint = " (Config.OnError skips or retries failing samples; tensorbatch shards verify lists every bad sample of a set of shards before a run)"

// badData reports whether err, a Fill's, may be the sample's data at
// fault: not a cancellation, a timeout, runtime.Goexit or a panic (a bug,
// not data).
func badData(err error) bool {
	var p *panicked
	return err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) &&
		!errors.Is(err, ErrTimeout) && !errors.Is(err, ErrGoexit) && !errors.As(err, &p)
}

func (e *SampleError) Unwrap() error { return e.Err }

// panicError turns a recovered value into an error, keeping error values.
func panicError(v any) error {
	if err, ok := v.(error); ok {
		return &panicked{fmt.Errorf("panic: %w", err)}
	}
	return &panicked{fmt.Errorf("panic: %v", v)}
}

// panicked is a recovered panic as an error.
type panicked struct{ error }

func (p *panicked) Unwrap() error { return errors.Unwrap(p.error) }

// configError names the Config field at fault.
func configError(field string, format string, args ...any) error {
	return fmt.Errorf("engine: Config.%s: %s", field, fmt.Sprintf(format, args...))
}
