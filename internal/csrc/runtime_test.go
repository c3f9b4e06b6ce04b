//go:build cgo

package csrc_test

import (
	"bytes"
	"os"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/internal/csrc"
	"github.com/tensorbatch/tensorbatch/internal/fakecudart"
)

func TestOpenNamesWhatIsMissing(t *testing.T) {
	_, err := csrc.Open(csrc.CUDA, "/nonexistent/libcudart.so.12")
	assert.ErrorContains(t, err, "csrc: open cuda runtime: /nonexistent/libcudart.so.12")
	// A library every machine of the OS has, without the runtime's symbols.
	lib := map[string]string{"windows": "kernel32.dll", "darwin": "libSystem.B.dylib"}[runtime.GOOS]
	if lib == "" {
		lib = "libc.so.6"
	}
	_, err = csrc.Open(csrc.HIP, lib)
	assert.ErrorContains(t, err, lib+": symbol hipGetDeviceCount not found")
}

func openFake(t *testing.T) *csrc.Runtime {
	rt, err := csrc.Open(csrc.CUDA, fakecudart.Path(t))
	require.NoError(t, err)
	t.Cleanup(rt.Close)
	return rt
}

func TestFakeRuntimeCopiesCompleteLater(t *testing.T) {
	rt := openFake(t)
	n, err := rt.DeviceCount()
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	require.NoError(t, rt.SetDevice(0))

	const size = 1 << 20
	host, err := rt.HostAlloc(size, csrc.HostPortable)
	require.NoError(t, err)
	back, err := rt.HostAlloc(size, csrc.HostPortable)
	require.NoError(t, err)
	dev, err := rt.Malloc(size)
	require.NoError(t, err)
	s, err := rt.StreamCreate()
	require.NoError(t, err)
	e, err := rt.EventCreate()
	require.NoError(t, err)
	for i := range host {
		host[i] = byte(i * 31)
	}
	t.Setenv("TB_FAKE_COPY_DELAY_US", "200000")
	require.NoError(t, rt.CopyToDeviceAsync(dev, host, s))
	require.NoError(t, rt.EventRecord(e, s))
	done, err := rt.EventQuery(e)
	require.NoError(t, err)
	assert.False(t, done, "a 200 ms copy completed at once")
	require.NoError(t, rt.EventSynchronize(e))
	done, err = rt.EventQuery(e)
	require.NoError(t, err)
	assert.True(t, done)
	require.NoError(t, rt.CopyToHostAsync(back, dev, s))
	require.NoError(t, rt.StreamSynchronize(s))
	assert.True(t, bytes.Equal(host, back), "device data differs")

	require.NoError(t, rt.EventDestroy(e))
	require.NoError(t, rt.StreamDestroy(s))
	require.NoError(t, rt.Free(dev))
	require.NoError(t, rt.HostFree(host))
	require.NoError(t, rt.HostFree(back))
}

func TestRuntimeErrorsCarryCodeAndMessage(t *testing.T) {
	rt := openFake(t)
	t.Setenv("TB_FAKE_FAIL", "cudaMalloc=2")
	_, err := rt.Malloc(64)
	var e *csrc.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, 2, e.Code)
	assert.EqualError(t, err, "cuda: cudaMalloc: cudaErrorMemoryAllocation (2): out of memory")
	assert.NotErrorIs(t, err, csrc.ErrNoDevice)

	t.Setenv("TB_FAKE_FAIL", "")
	t.Setenv("TB_FAKE_DEVICES", "0")
	n, err := rt.DeviceCount()
	assert.Zero(t, n)
	assert.ErrorIs(t, err, csrc.ErrNoDevice)
	assert.EqualError(t, err, "cuda: cudaGetDeviceCount: cudaErrorNoDevice (100): no CUDA-capable device is detected")

	t.Setenv("TB_FAKE_DEVICES", "")
	assert.ErrorIs(t, rt.SetDevice(4), csrc.ErrNoDevice, "an invalid ordinal is no usable device")
	assert.ErrorContains(t, rt.CopyToHost(make([]byte, 4), 0), "cudaErrorInvalidValue (1)")
}

// The real runtimes, as Debian packages them, on a machine with no GPU.
func TestRealRuntimesReportNoDevice(t *testing.T) {
	if runtime.GOOS+"/"+runtime.GOARCH != "linux/amd64" {
		t.Skipf("Debian's runtimes are linux/amd64 libraries; this is %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	for _, tc := range []struct {
		kind csrc.Kind
		path string
		pkg  string
	}{
		{csrc.CUDA, "/usr/lib/x86_64-linux-gnu/libcudart.so.11.0", "libcudart11.0 (non-free)"},
		{csrc.HIP, "/usr/lib/x86_64-linux-gnu/libamdhip64.so.5", "libamdhip64-dev"},
	} {
		t.Run(tc.kind.String(), func(t *testing.T) {
			if _, err := os.Stat(tc.path); err != nil {
				t.Skipf("%s is not installed (%s; scripts/install-deps.sh installs it)", tc.path, tc.pkg)
			}
			rt, err := csrc.Open(tc.kind, tc.path)
			require.NoError(t, err, "the real library has every symbol of the table")
			defer rt.Close()
			n, err := rt.DeviceCount()
			if err == nil && n > 0 {
				t.Skipf("this machine has %d %s device(s)", n, tc.kind)
			}
			assert.Zero(t, n)
			assert.ErrorIs(t, err, csrc.ErrNoDevice)
			t.Log(err)
		})
	}
}

// fakeBuffers returns host and device buffers of n bytes from the fake,
// freed at the end of the test.
func fakeBuffers(t *testing.T, rt *csrc.Runtime, n int) (host, back []byte, dev csrc.DevicePtr) {
	t.Helper()
	host, err := rt.HostAlloc(n, csrc.HostPortable)
	require.NoError(t, err)
	back, err = rt.HostAlloc(n, csrc.HostPortable)
	require.NoError(t, err)
	dev, err = rt.Malloc(n)
	require.NoError(t, err)
	t.Cleanup(func() {
		assert.NoError(t, rt.HostFree(host))
		assert.NoError(t, rt.HostFree(back))
		assert.NoError(t, rt.Free(dev))
	})
	return host, back, dev
}

func fill(b []byte, v byte) {
	for i := range b {
		b[i] = v
	}
}

func newStream(t *testing.T, rt *csrc.Runtime, flags uint) csrc.Stream {
	t.Helper()
	s, err := rt.StreamCreateWithFlags(flags)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, rt.StreamDestroy(s)) })
	return s
}

func newEvent(t *testing.T, rt *csrc.Runtime) csrc.Event {
	t.Helper()
	e, err := rt.EventCreate()
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, rt.EventDestroy(e)) })
	return e
}

const slowUS = "300000" // a copy the host is sure to outrun

// A late read of device memory on stream B, standing for the user's kernel,
// sees what a slow copy on stream A wrote only if B waits for A's event:
// without the wait the fake shows the stale data.
func TestStreamWaitEventOrdersStreams(t *testing.T) {
	for _, wait := range []bool{true, false} {
		t.Run(map[bool]string{true: "wait", false: "no wait"}[wait], func(t *testing.T) {
			rt := openFake(t)
			const n = 1 << 16
			host, back, dev := fakeBuffers(t, rt, n)
			a := newStream(t, rt, csrc.StreamNonBlocking)
			b := newStream(t, rt, csrc.StreamNonBlocking)
			e := newEvent(t, rt)

			fill(host, 'O')
			require.NoError(t, rt.CopyToDevice(dev, host))
			fill(host, 'N')
			t.Setenv("TB_FAKE_COPY_DELAY_US", slowUS)
			require.NoError(t, rt.CopyToDeviceAsync(dev, host, a))
			require.NoError(t, rt.EventRecord(e, a))
			if wait {
				require.NoError(t, rt.StreamWaitEvent(b, e))
			}
			t.Setenv("TB_FAKE_COPY_DELAY_US", "0")
			require.NoError(t, rt.CopyToHostAsync(back, dev, b))
			require.NoError(t, rt.StreamSynchronize(b))
			done, err := rt.EventQuery(e)
			require.NoError(t, err)
			if wait {
				assert.True(t, done, "b ran before the event it waits for")
				assert.Equal(t, bytes.Repeat([]byte{'N'}, n), back)
			} else {
				assert.False(t, done, "a 300 ms copy completed at once")
				assert.Equal(t, bytes.Repeat([]byte{'O'}, n), back, "the fake missed a read before the write")
			}
			require.NoError(t, rt.StreamSynchronize(a))
		})
	}
}

// Waiting on an event never recorded is no wait, and a record made after
// the wait does not change what it waits for.
func TestStreamWaitEventCapturesTheCurrentRecord(t *testing.T) {
	rt := openFake(t)
	host, _, dev := fakeBuffers(t, rt, 4096)
	a := newStream(t, rt, csrc.StreamNonBlocking)
	b := newStream(t, rt, csrc.StreamNonBlocking)
	e, done := newEvent(t, rt), newEvent(t, rt)
	require.NoError(t, rt.StreamWaitEvent(b, e))
	t.Setenv("TB_FAKE_COPY_DELAY_US", slowUS)
	require.NoError(t, rt.CopyToDeviceAsync(dev, host, a))
	require.NoError(t, rt.EventRecord(e, a))
	require.NoError(t, rt.EventRecord(done, b))
	require.NoError(t, rt.EventSynchronize(done))
	ready, err := rt.EventQuery(e)
	require.NoError(t, err)
	assert.False(t, ready, "b waited for a record made after its wait")
}

// Work recorded on LegacyStream waits for the work already queued on
// blocking streams, not for that on non-blocking streams.
func TestLegacyStreamSynchronizesWithBlockingStreams(t *testing.T) {
	rt := openFake(t)
	host, _, dev := fakeBuffers(t, rt, 4096)
	for _, tc := range []struct {
		name   string
		flags  uint
		waited bool
	}{
		{"blocking", csrc.StreamDefault, true},
		{"non-blocking", csrc.StreamNonBlocking, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runtime.LockOSThread() // LegacyStream is the current device's; the thread ends with the test
			require.NoError(t, rt.SetDevice(0))
			s := newStream(t, rt, tc.flags)
			work, legacy := newEvent(t, rt), newEvent(t, rt)
			t.Setenv("TB_FAKE_COPY_DELAY_US", slowUS)
			require.NoError(t, rt.CopyToDeviceAsync(dev, host, s))
			require.NoError(t, rt.EventRecord(work, s))
			require.NoError(t, rt.EventRecord(legacy, csrc.LegacyStream))
			require.NoError(t, rt.EventSynchronize(legacy))
			done, err := rt.EventQuery(work)
			require.NoError(t, err)
			assert.Equal(t, tc.waited, done, "the work queued before the legacy stream's record is done")
			require.NoError(t, rt.DeviceSynchronize())
			done, err = rt.EventQuery(work)
			require.NoError(t, err)
			assert.True(t, done, "DeviceSynchronize waits for every stream")
		})
	}
}

// Streams and events belong to the device current when they were made, per
// OS thread. As in CUDA, an event is recorded only on a stream of its own
// device, LegacyStream being the current device's; TB_FAKE_STRICT_DEVICE
// also refuses copies on a stream of a device that is not current.
func TestStreamsBelongToTheCurrentDevice(t *testing.T) {
	runtime.LockOSThread() // the current device is the thread's; it ends with the test
	rt := openFake(t)
	t.Setenv("TB_FAKE_DEVICES", "2")
	t.Setenv("TB_FAKE_COPY_DELAY_US", "0")
	host, err := rt.HostAlloc(64, csrc.HostPortable)
	require.NoError(t, err)
	defer rt.HostFree(host)
	require.NoError(t, rt.SetDevice(1))
	dev, err := rt.Malloc(64)
	require.NoError(t, err)
	defer rt.Free(dev)
	s1 := newStream(t, rt, csrc.StreamNonBlocking)
	e1 := newEvent(t, rt)
	require.NoError(t, rt.SetDevice(0))
	e0 := newEvent(t, rt)

	err = rt.EventRecord(e1, csrc.LegacyStream)
	var rerr *csrc.Error
	require.ErrorAs(t, err, &rerr)
	assert.Equal(t, 400, rerr.Code)
	assert.EqualError(t, err, "cuda: cudaEventRecord: cudaErrorInvalidResourceHandle (400): invalid resource handle")
	assert.NotErrorIs(t, err, csrc.ErrNoDevice)
	assert.ErrorContains(t, rt.EventRecord(e0, s1), "(400)", "device 0's event on device 1's stream")
	assert.NoError(t, rt.EventRecord(e1, s1), "CUDA records an event on a stream of its device from any device")
	assert.NoError(t, rt.CopyToDeviceAsync(dev, host, s1), "CUDA copies on a stream of another device")
	assert.NoError(t, rt.StreamWaitEvent(s1, e0), "CUDA waits across devices")

	t.Setenv("TB_FAKE_STRICT_DEVICE", "1")
	assert.ErrorContains(t, rt.CopyToDeviceAsync(dev, host, s1), "cudaMemcpyAsync: cudaErrorInvalidResourceHandle (400)")
	assert.ErrorContains(t, rt.EventRecord(e1, s1), "(400)")
	assert.ErrorContains(t, rt.StreamWaitEvent(s1, e0), "cudaStreamWaitEvent: cudaErrorInvalidResourceHandle (400)")
	require.NoError(t, rt.SetDevice(1))
	assert.NoError(t, rt.CopyToDeviceAsync(dev, host, s1))
	assert.NoError(t, rt.EventRecord(e1, s1))
	assert.NoError(t, rt.EventRecord(e1, csrc.LegacyStream))
	assert.NoError(t, rt.StreamWaitEvent(s1, e0))
	require.NoError(t, rt.DeviceSynchronize())
}
