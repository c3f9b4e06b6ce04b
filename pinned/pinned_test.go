package pinned_test

import (
	"context"
	"errors"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/tensorbatch/tensorbatch/pinned"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestCPUHostAllocIsPageAlignedAndZero(t *testing.T) {
	var cpu pinned.CPU
	for _, n := range []int{1, 4095, 4096, 1 << 20} {
		b, err := cpu.HostAlloc(n)
		require.NoError(t, err)
		assert.Len(t, b, n)
		assert.Zero(t, uintptr(unsafe.Pointer(&b[0]))%uintptr(syscall.Getpagesize()))
		assert.Zero(t, cap(b)%syscall.Getpagesize())
		for _, v := range b {
			require.Zero(t, v)
		}
		b[n-1] = 1
		require.NoError(t, cpu.HostFree(b))
	}
	_, err := cpu.HostAlloc(0)
	assert.ErrorContains(t, err, "host alloc of 0 bytes")
}

// fence completes when its flag is set.
type fence struct{ done atomic.Bool }

func (f *fence) Done() (bool, error) { return f.done.Load(), nil }

// counting wraps a backend and counts live allocations; it fails when fail is set.
type counting struct {
	pinned.CPU
	live atomic.Int64
	fail atomic.Bool
}

func (c *counting) HostAlloc(n int) ([]byte, error) {
	if c.fail.Load() {
		return nil, syscall.ENOMEM
	}
	c.live.Add(1)
	return c.CPU.HostAlloc(n)
}

func (c *counting) HostFree(b []byte) error {
	c.live.Add(-1)
	return c.CPU.HostFree(b)
}

func TestPoolReusesOnlyAfterTheFence(t *testing.T) {
	be := &counting{}
	p := pinned.NewPool(be, 0)
	ctx := context.Background()
	a, err := p.Get(ctx, 1000)
	require.NoError(t, err)
	f := &fence{}
	require.NoError(t, p.Put(a, f))

	// A Get that fits the fenced buffer waits for its fence rather than
	// reuse it early or allocate another.
	got := make(chan *pinned.Buffer)
	go func() {
		c, err := p.Get(ctx, 900)
		assert.NoError(t, err)
		got <- c
	}()
	select {
	case <-got:
		t.Fatal("a fenced buffer was handed out before its copy completed")
	case <-time.After(20 * time.Millisecond):
	}
	f.done.Store(true)
	c := <-got
	assert.True(t, a == c, "the completed buffer is reused")
	assert.Len(t, c.Bytes(), 900)

	// With nothing cached, Get allocates.
	b, err := p.Get(ctx, 1000)
	require.NoError(t, err)
	assert.True(t, a != b)

	st := p.Stats()
	assert.Equal(t, int64(2), st.Allocs)
	assert.Equal(t, int64(1), st.Reuses)
	assert.Equal(t, int64(1), st.Waits)
	assert.Equal(t, 2, st.Buffers)
	assert.Equal(t, 2, st.PeakBufs)

	require.NoError(t, p.Put(b, nil))
	require.NoError(t, p.Put(c, nil))
	require.NoError(t, p.Close())
	require.NoError(t, p.Close(), "twice")
	assert.Zero(t, be.live.Load(), "pinned memory leaked")
	assert.Zero(t, p.Stats().Allocated)
	_, err = p.Get(ctx, 10)
	assert.ErrorIs(t, err, pinned.ErrClosed)
}

func TestPoolTryGetNeverWaitsNorAllocates(t *testing.T) {
	t.Parallel()
	be := &counting{}
	p := pinned.NewPool(be, 0)
	ctx := context.Background()
	assert.Nil(t, p.TryGet(100), "nothing cached: no allocation")
	a, err := p.Get(ctx, 1000)
	require.NoError(t, err)
	f := &fence{}
	require.NoError(t, p.Put(a, f))
	assert.Nil(t, p.TryGet(900), "the only buffer that fits is still fenced")
	assert.Nil(t, p.TryGet(2000), "none fits")
	f.done.Store(true)
	b := p.TryGet(900)
	require.True(t, a == b, "the completed buffer is handed out")
	assert.Len(t, b.Bytes(), 900)
	assert.Nil(t, p.TryGet(0))
	st := p.Stats()
	assert.Equal(t, int64(1), st.Allocs)
	assert.Equal(t, int64(1), st.Reuses)
	assert.Zero(t, st.Waits)
	require.NoError(t, p.Put(b, nil))
	require.NoError(t, p.Close())
	assert.Nil(t, p.TryGet(10), "closed")
	assert.Zero(t, be.live.Load(), "pinned memory leaked")
}

// Of the cached buffers of one size, the one put last comes back first:
// the one most likely still in the CPU's cache.
func TestPoolReusesTheLastPutFirst(t *testing.T) {
	t.Parallel()
	be := &counting{}
	p := pinned.NewPool(be, 0)
	ctx := context.Background()
	var bufs []*pinned.Buffer
	for range 3 {
		b, err := p.Get(ctx, 1000)
		require.NoError(t, err)
		bufs = append(bufs, b)
	}
	for _, b := range bufs {
		require.NoError(t, p.Put(b, nil))
	}
	for i := range bufs {
		assert.True(t, p.TryGet(1000) == bufs[len(bufs)-1-i], "buffer %d", i)
	}
	for _, b := range bufs {
		require.NoError(t, p.Put(b, nil))
	}
	require.NoError(t, p.Close())
	assert.Zero(t, be.live.Load(), "pinned memory leaked")
}

func TestPoolLimitIsBackpressure(t *testing.T) {
	be := &counting{}
	p := pinned.NewPool(be, 8192)
	ctx := context.Background()
	a, err := p.Get(ctx, 4096)
	require.NoError(t, err)
	b, err := p.Get(ctx, 4096)
	require.NoError(t, err)

	// At the limit, Get waits, until its ctx says stop...
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	_, err = p.Get(short, 4096)
	cancel()
	assert.ErrorIs(t, err, context.DeadlineExceeded)

	// ...or a buffer comes back and its fence completes.
	f := &fence{}
	got := make(chan *pinned.Buffer)
	go func() {
		c, err := p.Get(ctx, 4096)
		assert.NoError(t, err)
		got <- c
	}()
	require.NoError(t, p.Put(a, f))
	select {
	case <-got:
		t.Fatal("Get returned a buffer whose fence is not done")
	case <-time.After(20 * time.Millisecond):
	}
	f.done.Store(true)
	c := <-got
	assert.True(t, a == c, "the buffer that came back is reused")
	assert.Positive(t, p.Stats().Waits)

	// Idle buffers of another size are freed to make room under the limit.
	require.NoError(t, p.Put(b, nil))
	require.NoError(t, p.Put(c, nil))
	d, err := p.Get(ctx, 8000)
	require.NoError(t, err)
	assert.Equal(t, 1, p.Stats().Buffers)

	_, err = p.Get(ctx, 9000)
	assert.ErrorContains(t, err, "9000 bytes asked, more than the pool limit of 8192")
	require.NoError(t, p.Put(d, nil))
	require.NoError(t, p.Close())
	assert.Zero(t, be.live.Load())
}

func TestPoolAllocFailureSaysWhatIsInUse(t *testing.T) {
	t.Parallel()
	be := &counting{}
	p := pinned.NewPool(be, 0)
	a, err := p.Get(context.Background(), 5000)
	require.NoError(t, err)
	be.fail.Store(true)
	_, err = p.Get(context.Background(), 7000)
	assert.ErrorIs(t, err, syscall.ENOMEM)
	assert.EqualError(t, err, "pinned: cpu host alloc of 7000 bytes with 8192 bytes in 1 buffers already allocated (8192 in use): cannot allocate memory")
	require.NoError(t, p.Close())
	assert.Equal(t, int64(1), be.live.Load(), "a buffer in use is not freed by Close")
	require.NoError(t, p.Put(a, nil))
	assert.Zero(t, be.live.Load(), "it is freed when put back")
	assert.False(t, errors.Is(err, pinned.ErrClosed))
}
