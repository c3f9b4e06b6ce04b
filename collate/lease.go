package collate

import (
	"fmt"
	"sync/atomic"
)

// A Lease is the lifetime of memory that tensor views share, for a
// checked mode of their owner: once the lease has ended, reading a view
// taken under it (Tensor.Bytes, As, the kernels) panics with a message
// that names what the memory was, instead of returning whatever the
// memory holds by then. The engine leases a batch's tensors so in its
// checked mode (engine.Config.CheckReleased). A view taken before its
// lease ends and read through a slice kept from it is not checked: the
// check is on the Tensor, not on the memory.
type Lease struct {
	ended atomic.Bool
	what  fmt.Stringer // what the memory was, for the panic: "batch 3 of epoch 0"
	hint  string       // how to keep it, for the panic
}

// NewLease returns a lease on memory that what describes ("batch 3 of
// epoch 0"; formatted only when a read panics); hint, when not "", says
// how to keep the memory longer.
func NewLease(what fmt.Stringer, hint string) *Lease { return &Lease{what: what, hint: hint} }

// End ends the lease: every view taken under it panics when read. It is
// safe to call more than once, from any goroutine, and on a nil Lease.
func (l *Lease) End() {
	if l != nil {
		l.ended.Store(true)
	}
}

// Ended reports whether the lease has ended; a nil Lease never does.
func (l *Lease) Ended() bool { return l != nil && l.ended.Load() }

// check panics when the lease has ended; name is the field read.
func (l *Lease) check(name string) {
	if l == nil || !l.ended.Load() {
		return
	}
	field := ""
	if name != "" {
		field = fmt.Sprintf(" (field %q)", name)
	}
	msg := fmt.Sprintf("collate: a tensor%s of %s read after it was released: its memory may hold other data now", field, l.what)
	if l.hint != "" {
		msg += "; " + l.hint
	}
	panic(msg)
}

// Leased returns t as a view under lease l: reading it after l ends
// panics (see Lease). A nil l checks nothing.
func (t Tensor) Leased(l *Lease) Tensor {
	t.lease = l
	return t
}
