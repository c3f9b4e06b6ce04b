package csrc_test

import (
	"bytes"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/csrc"
	"github.com/tensorbatch/tensorbatch/internal/fakecudart"
)

func TestOpenNamesWhatIsMissing(t *testing.T) {
	_, err := csrc.Open(csrc.CUDA, "/nonexistent/libcudart.so.12")
	assert.ErrorContains(t, err, "csrc: open cuda runtime: /nonexistent/libcudart.so.12")
	_, err = csrc.Open(csrc.HIP, "libc.so.6")
	assert.ErrorContains(t, err, "symbol hipGetDeviceCount not found")
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
