package pinned

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/tensorbatch/tensorbatch/internal/csrc"
)

// Buffer is a buffer handed out by a Pool: host memory, or device memory
// for a device pool.
type Buffer struct {
	mem   []byte         // the whole host allocation; nil for device memory
	dev   csrc.DevicePtr // device memory; 0 for host memory
	size  int            // bytes allocated
	n     int            // bytes asked for
	event csrc.Event     // a GPU buffer's event, recorded after its copy
	fence Fence          // set by Put; the buffer is reusable once it is done

	useEvents []csrc.Event // a device buffer's events of RecordUse, made as needed
	used      int          // how many of useEvents the next Upload waits for
}

// Bytes returns the n bytes asked for in Get (nil for device memory).
func (b *Buffer) Bytes() []byte {
	if b.mem == nil {
		return nil
	}
	return b.mem[:b.n:b.n]
}

// Len returns the bytes asked for in Get.
func (b *Buffer) Len() int { return b.n }

// Cap returns the bytes allocated, as the pool's stats count them.
func (b *Buffer) Cap() int { return b.size }

// Device returns the device memory of a device pool's buffer.
func (b *Buffer) Device() DevicePtr { return b.dev }

// Event returns the buffer's own event on a GPU backend (0 on cpu): record
// it after the copy that reads or writes the buffer, and Put the buffer
// back with the backend's Fence of it. Each buffer has its own event, so a
// fence never outlives the event it queries.
func (b *Buffer) Event() Event { return b.event }

// allocator is the memory a pool caches.
type allocator interface {
	name() string
	alloc(n int) (*Buffer, error)
	free(b *Buffer) error
}

// hostMemory is a backend's host memory; GPU host buffers get an event.
type hostMemory struct {
	be            Backend
	writeCombined bool
}

func (h hostMemory) name() string {
	if h.writeCombined {
		return h.be.Name() + " write-combined host"
	}
	return h.be.Name() + " host"
}

func (h hostMemory) alloc(n int) (*Buffer, error) {
	var mem []byte
	var err error
	if g, ok := h.be.(*GPU); ok && h.writeCombined {
		mem, err = g.HostAllocWriteCombined(n)
	} else {
		mem, err = h.be.HostAlloc(n)
	}
	if err != nil {
		return nil, err
	}
	b := &Buffer{mem: mem, size: cap(mem)}
	if g, ok := h.be.(*GPU); ok {
		if b.event, err = g.NewEvent(); err != nil {
			return nil, errors.Join(err, h.be.HostFree(mem))
		}
	}
	return b, nil
}

func (h hostMemory) free(b *Buffer) error {
	var err error
	if g, ok := h.be.(*GPU); ok && b.event != 0 {
		err = g.Runtime().EventDestroy(b.event)
	}
	return errors.Join(err, h.be.HostFree(b.mem))
}

// deviceMemory is a GPU's device memory.
type deviceMemory struct{ g *GPU }

func (d deviceMemory) name() string { return fmt.Sprintf("%s:%d device", d.g.Name(), d.g.Device()) }

func (d deviceMemory) alloc(n int) (*Buffer, error) {
	p, err := d.g.Malloc(n)
	if err != nil {
		return nil, err
	}
	e, err := d.g.NewEvent()
	if err != nil {
		return nil, errors.Join(err, d.g.Free(p))
	}
	return &Buffer{dev: p, size: n, event: e}, nil
}

// free waits for the uses recorded on b (cudaFree would synchronize the
// device anyway) and frees it.
func (d deviceMemory) free(b *Buffer) error {
	rt := d.g.Runtime()
	var errs []error
	for _, e := range b.useEvents[:b.used] {
		errs = append(errs, rt.EventSynchronize(e))
	}
	errs = append(errs, rt.EventDestroy(b.event))
	for _, e := range b.useEvents {
		errs = append(errs, rt.EventDestroy(e))
	}
	return errors.Join(append(errs, d.g.Free(b.dev))...)
}

// PoolStats is a snapshot of a pool's accounting.
type PoolStats struct {
	Allocated int64 // bytes held from the backend
	InUse     int64 // bytes of buffers handed out and not yet put back
	Buffers   int   // buffers held from the backend
	Peak      int64 // the most bytes held at once
	PeakBufs  int   // the most buffers held at once
	Allocs    int64 // backend allocations so far
	Reuses    int64 // Gets served from the cache
	Waits     int64 // Gets that waited for a fence or for the limit
}

// Pool caches host buffers, as PyTorch's CachingHostAllocator does: a
// buffer put back with a fence is reused only once the fence is done. Get
// waits for a cached buffer whose fence is pending rather than allocate
// another, so the buffers in existence never outnumber the most handed out
// at once; and when Limit bytes are allocated, Get waits for a buffer to
// come back instead of allocating more.
type Pool struct {
	mem   allocator
	limit int64

	mu     sync.Mutex
	free   []*Buffer
	stats  PoolStats
	closed bool
	wake   chan struct{} // made when a Get waits; closed and dropped by Put
}

// PoolOption configures NewPool.
type PoolOption func(*hostMemory)

// WriteCombined makes a GPU backend's host buffers write-combined
// (cudaHostAllocWriteCombined / hipHostMallocWriteCombined). The cpu
// backend has no such memory and ignores it.
func WriteCombined() PoolOption { return func(h *hostMemory) { h.writeCombined = true } }

// NewPool returns a pool of be's host memory. limit caps the bytes
// allocated; 0 means no cap.
func NewPool(be Backend, limit int64, opts ...PoolOption) *Pool {
	h := hostMemory{be: be}
	for _, o := range opts {
		o(&h)
	}
	return &Pool{mem: h, limit: limit}
}

// NewDevicePool returns a pool of g's device memory. limit caps the bytes
// allocated; 0 means no cap.
func NewDevicePool(g *GPU, limit int64) *Pool {
	return &Pool{mem: deviceMemory{g}, limit: limit}
}

// fencePoll is how often a Get waiting on an unfinished fence looks again.
const fencePoll = 50 * time.Microsecond

// Get returns a buffer of at least n bytes. It waits while the limit is
// reached and every cached buffer is still fenced, until ctx is done.
func (p *Pool) Get(ctx context.Context, n int) (*Buffer, error) {
	waited := false
	for {
		p.mu.Lock()
		b, wake, pending, err := p.tryGet(n)
		if waited && (b != nil || err != nil) {
			p.stats.Waits++
		}
		p.mu.Unlock()
		if b != nil || err != nil {
			return b, err
		}
		waited = true
		if err := wait(ctx, wake, pending); err != nil {
			return nil, err
		}
	}
}

// wait blocks until wake is closed, ctx is done or, when poll is set, one
// fence-poll interval has passed.
func wait(ctx context.Context, wake <-chan struct{}, poll bool) error {
	var tick <-chan time.Time
	if poll {
		t := time.NewTimer(fencePoll)
		defer t.Stop()
		tick = t.C
	}
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-wake:
	case <-tick:
	}
	return nil
}

// tryGet serves n bytes from the cache or the backend. It returns no buffer
// and no error when the caller must wait; pending says whether a fence is
// outstanding (so polling may help).
func (p *Pool) tryGet(n int) (b *Buffer, wake chan struct{}, pending bool, err error) {
	if p.closed {
		return nil, nil, false, ErrClosed
	}
	if n <= 0 {
		return nil, nil, false, fmt.Errorf("pinned: get of %d bytes", n)
	}
	b, pending, err = p.reuse(n)
	if b != nil || err != nil {
		return b, nil, false, err
	}
	if pending {
		// A buffer that fits is only waiting for its copy: wait for it
		// rather than allocate, so that the buffers in existence stay
		// bounded by the buffers handed out at once.
		return nil, p.waker(), true, nil
	}
	// Make room under the limit by freeing idle buffers of other sizes.
	for p.limit > 0 && p.stats.Allocated+int64(n) > p.limit {
		i := p.idle()
		if i < 0 {
			break
		}
		c := p.free[i]
		p.free = append(p.free[:i], p.free[i+1:]...)
		if err := p.release(c); err != nil {
			return nil, nil, false, err
		}
	}
	if p.limit > 0 && p.stats.Allocated+int64(n) > p.limit {
		if int64(n) > p.limit {
			return nil, nil, false, fmt.Errorf("pinned: %d bytes asked, more than the pool limit of %d", n, p.limit)
		}
		return nil, p.waker(), pending || len(p.free) > 0, nil
	}
	b, err = p.mem.alloc(n)
	if err != nil {
		return nil, nil, false, fmt.Errorf("pinned: %s alloc of %d bytes with %d bytes in %d buffers already allocated (%d in use): %w",
			p.mem.name(), n, p.stats.Allocated, p.stats.Buffers, p.stats.InUse, err)
	}
	p.stats.Allocs++
	p.stats.Buffers++
	p.stats.Allocated += int64(b.size)
	p.stats.Peak = max(p.stats.Peak, p.stats.Allocated)
	p.stats.PeakBufs = max(p.stats.PeakBufs, p.stats.Buffers)
	return p.handOut(b, n), nil, false, nil
}

// TryGet returns a cached buffer of at least n bytes whose fence is done,
// or nil (then Get says why, or waits): it neither waits nor allocates, so
// a caller may hold a lock of its own around it.
func (p *Pool) TryGet(n int) *Buffer {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || n <= 0 {
		return nil
	}
	b, _, _ := p.reuse(n)
	return b
}

// reuse hands out the smallest cached buffer that fits n bytes and whose
// fence is done, if any (of several, the one put last: the likeliest
// still in the CPU's cache); pending says whether one that fits is still
// fenced. Called with p.mu held.
func (p *Pool) reuse(n int) (b *Buffer, pending bool, err error) {
	best := -1
	for i, c := range p.free {
		if !fits(c, n) {
			continue
		}
		if done, err := fenceDone(c.fence); err != nil {
			return nil, false, err
		} else if !done {
			pending = true
			continue
		}
		if best < 0 || c.size <= p.free[best].size {
			best = i
		}
	}
	if best < 0 {
		return nil, pending, nil
	}
	b = p.free[best]
	p.free = append(p.free[:best], p.free[best+1:]...)
	p.stats.Reuses++
	return p.handOut(b, n), false, nil
}

func (p *Pool) handOut(b *Buffer, n int) *Buffer {
	b.n, b.fence = n, nil
	p.stats.InUse += int64(b.size)
	return b
}

// idle returns the index of a cached buffer whose fence is done, or -1.
func (p *Pool) idle() int {
	for i, c := range p.free {
		if done, _ := fenceDone(c.fence); done {
			return i
		}
	}
	return -1
}

// Put hands b back. It is reused once f is done; a nil f means at once.
// After Close, Put frees the buffer once its fence is done.
func (p *Pool) Put(b *Buffer, f Fence) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	b.fence = f
	p.stats.InUse -= int64(b.size)
	if p.closed {
		return p.release(b)
	}
	p.free = append(p.free, b)
	if p.wake != nil {
		close(p.wake)
		p.wake = nil
	}
	return nil
}

// waker returns the channel the next Put closes. Called with p.mu held.
func (p *Pool) waker() chan struct{} {
	if p.wake == nil {
		p.wake = make(chan struct{})
	}
	return p.wake
}

// release waits for b's fence and frees it. Called with p.mu held.
func (p *Pool) release(b *Buffer) error {
	for {
		done, err := fenceDone(b.fence)
		if err != nil || done {
			break
		}
		time.Sleep(fencePoll)
	}
	p.stats.Buffers--
	p.stats.Allocated -= int64(b.size)
	return p.mem.free(b)
}

// Close frees every cached buffer, waiting for their fences. Buffers still
// handed out are freed when they are Put back. Close is idempotent.
func (p *Pool) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	var errs []error
	for _, b := range p.free {
		errs = append(errs, p.release(b))
	}
	p.free = nil
	if p.wake != nil {
		close(p.wake)
		p.wake = nil
	}
	return errors.Join(errs...)
}

// Stats returns a snapshot of the pool's accounting.
func (p *Pool) Stats() PoolStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// fits reports whether b can serve n bytes without wasting more than
// max(n, 64 KiB).
func fits(b *Buffer, n int) bool {
	c := b.size
	return c >= n && c-n <= max(n, 64<<10)
}

func fenceDone(f Fence) (bool, error) {
	if f == nil {
		return true, nil
	}
	return f.Done()
}
