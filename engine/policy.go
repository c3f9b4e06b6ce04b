package engine

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// ErrorPolicy says what a failing sample does (Config.OnError). The zero
// value fails the epoch at the failing sample's batch, as PyTorch does.
//
// A skipped sample is left out of its batch, which is delivered short:
// the samples after it move down, and Batch.Indices lists the ones
// delivered. Later batches are not refilled, so every batch holds the same
// samples whatever Workers, PrefetchFactor or scheduling are. A batch
// whose every sample fails is not delivered at all. The budget is charged
// in delivery order, so the sample that exhausts it is the same on every
// run; its error, wrapping its *SampleError, then ends the epoch.
type ErrorPolicy struct {
	// Skip is the number of failing samples an epoch may skip (on this
	// rank). Skipped samples are counted in Stats and logged with slog.
	Skip int
	// SkipFraction is the fraction of the epoch's samples (on this rank)
	// that may be skipped; the larger of the two budgets applies.
	SkipFraction float64
	// Retries is how many times a sample whose error is transient (see
	// Transient) is filled again before it counts as failed. A panic, a
	// Timeout and any other error are never retried.
	Retries int
	// Backoff is the wait before the first retry, doubling at each one; 0
	// means 10 ms.
	Backoff time.Duration
}

// ErrTransient marks an error worth retrying (ErrorPolicy.Retries): a
// read that timed out, a 503. Wrap an error with Transient, or make its
// chain match ErrTransient with errors.Is.
var ErrTransient = errors.New("engine: transient")

// Transient wraps err so that ErrorPolicy.Retries retries the sample. It
// returns nil for a nil err.
func Transient(err error) error {
	if err == nil {
		return nil
	}
	return transientError{err}
}

type transientError struct{ err error }

func (e transientError) Error() string        { return e.err.Error() }
func (e transientError) Unwrap() error        { return e.err }
func (e transientError) Is(target error) bool { return target == ErrTransient }

func (p ErrorPolicy) validate() error {
	switch {
	case p.Skip < 0:
		return configError("OnError.Skip", "%d, want >= 0", p.Skip)
	case !(p.SkipFraction >= 0 && p.SkipFraction <= 1):
		return configError("OnError.SkipFraction", "%v, want between 0 and 1", p.SkipFraction)
	case p.Retries < 0:
		return configError("OnError.Retries", "%d, want >= 0", p.Retries)
	case p.Backoff < 0:
		return configError("OnError.Backoff", "%v, want >= 0 (0 means 10ms)", p.Backoff)
	}
	return nil
}

// skips reports whether failing samples are skipped rather than fatal.
func (p ErrorPolicy) skips() bool { return p.Skip > 0 || p.SkipFraction > 0 }

// budget returns the samples an epoch of batches may skip; samples counts
// them, called only for a fractional budget.
func (p ErrorPolicy) budget(batches int, samples func() int) int {
	n := p.Skip
	if p.SkipFraction > 0 && batches > 0 {
		n = max(n, int(math.Floor(p.SkipFraction*float64(samples()))))
	}
	return n
}

// retry reports whether a fill that failed with err (and stack, for a
// panic) at attempt (from 0) is tried again.
func (p ErrorPolicy) retry(attempt int, err error, stack []byte) bool {
	return attempt < p.Retries && stack == nil && errors.Is(err, ErrTransient) && !errors.Is(err, ErrTimeout)
}

// backoff is the wait before retry attempt+1.
func (p ErrorPolicy) backoff(attempt int) time.Duration {
	d := p.Backoff
	if d == 0 {
		d = 10 * time.Millisecond
	}
	return d << min(attempt, 20)
}

// sampleIndex returns the index a *SampleError in err's chain names, or -1.
func sampleIndex(err error) int {
	var se *SampleError
	if errors.As(err, &se) {
		return se.Index
	}
	return -1
}

// SkippedSample is a sample left out of its batch under an ErrorPolicy.
type SkippedSample struct {
	Epoch, Index int
	Err          string
}

// maxSkippedKept bounds Stats.SkippedSamples.
const maxSkippedKept = 1000

// skip records a skipped sample: counted, kept for Stats (the first
// maxSkippedKept), logged.
func (l *loader) skip(e *SampleError) {
	l.skipped.Add(1)
	l.statsMu.Lock()
	if len(l.skippedList) < maxSkippedKept {
		l.skippedList = append(l.skippedList, SkippedSample{Epoch: e.Epoch, Index: e.Index, Err: e.Err.Error()})
	}
	l.statsMu.Unlock()
	l.logger.Warn("tensorbatch: skipping a failed sample (Config.OnError)", "epoch", e.Epoch, "index", e.Index, "err", fmt.Sprint(e.Err))
}
