package pinned_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tensorbatch/tensorbatch/internal/csrc"
	"github.com/tensorbatch/tensorbatch/internal/fakecudart"
	"github.com/tensorbatch/tensorbatch/internal/launch"
	"github.com/tensorbatch/tensorbatch/pinned"
)

// useFake points Select at the fake CUDA runtime and at no HIP library,
// with no launcher variables (an empty one counts as unset).
func useFake(t *testing.T) {
	t.Setenv(pinned.EnvCUDALib, fakecudart.Path(t))
	t.Setenv(pinned.EnvHIPLib, "/nonexistent/libamdhip64.so")
	t.Setenv(pinned.EnvBackend, "")
	clearLauncherEnv(t)
	pinned.ResetSelections()
	t.Cleanup(pinned.ResetSelections)
}

func TestSelectAutoFindsTheRuntime(t *testing.T) {
	useFake(t)
	s, err := pinned.Select("")
	require.NoError(t, err)
	assert.Equal(t, "cuda", s.Backend.Name())
	assert.Equal(t, "auto: "+fakecudart.Path(t)+" loaded, 1 device(s), using device 0 by default", s.Reason)
	g := s.Backend.(*pinned.GPU)
	assert.Equal(t, 0, g.Device())

	again, err := pinned.Select("auto")
	require.NoError(t, err)
	assert.Same(t, g, again.Backend, "the choice is made once")
}

func TestSelectFallsBackToCPUWithTheReason(t *testing.T) {
	for _, tc := range []struct {
		env, value, reason string
	}{
		{"TB_FAKE_DEVICES", "0", "cudaErrorNoDevice (100)"},
		{"TB_FAKE_NO_DRIVER", "1", "cudaErrorInsufficientDriver (35)"},
		{"TB_FAKE_FAIL", "cudaStreamCreateWithFlags=999", "probe of device 0: cuda: cudaStreamCreateWithFlags: cudaErrorUnknown (999)"},
		{"TB_FAKE_FAIL", "cudaHostAlloc=2", "probe of device 0: cuda: cudaHostAlloc: cudaErrorMemoryAllocation (2)"},
		{pinned.EnvCUDALib, "/nonexistent/libcudart.so", "no library loads (tried /nonexistent/libcudart.so)"},
	} {
		t.Run(tc.env+"="+tc.value, func(t *testing.T) {
			useFake(t)
			t.Setenv(tc.env, tc.value)
			s, err := pinned.Select("auto")
			require.NoError(t, err)
			assert.Equal(t, "cpu", s.Backend.Name())
			assert.Contains(t, s.Reason, "auto fell back to cpu: hip: no library loads (tried /nonexistent/libamdhip64.so); cuda: ")
			assert.Contains(t, s.Reason, tc.reason)

			// Asked for by name, the same failure is an error.
			pinned.ResetSelections()
			_, err = pinned.Select("cuda")
			assert.ErrorContains(t, err, "pinned: backend cuda asked for: ")
			assert.ErrorContains(t, err, tc.reason)
		})
	}
}

func clearLauncherEnv(t *testing.T) {
	for _, v := range launch.Vars() {
		t.Setenv(v, "")
	}
}

// Runtime failures are *pinned.RuntimeError values, which callers outside
// the module can name.
func TestRuntimeErrorsAreRuntimeErrors(t *testing.T) {
	useFake(t)
	t.Setenv("TB_FAKE_DEVICES", "0")
	_, err := pinned.Select("cuda")
	var re *pinned.RuntimeError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, "cuda", re.Kind.String())
	assert.Equal(t, "cudaGetDeviceCount", re.Call)
	assert.Equal(t, 100, re.Code)
	assert.Equal(t, "cudaErrorNoDevice", re.Name)
	assert.ErrorIs(t, err, pinned.ErrNoDevice)
}

func TestSelectSpecAndDeviceOrdinal(t *testing.T) {
	useFake(t)
	t.Setenv("TB_FAKE_DEVICES", "2")
	s, err := pinned.Select("cuda:1")
	require.NoError(t, err)
	assert.Equal(t, 1, s.Backend.(*pinned.GPU).Device())
	assert.Contains(t, s.Reason, `2 device(s), using device 1 from "cuda:1"`)

	_, err = pinned.Select("cuda:2")
	assert.ErrorContains(t, err, `no GPU device: device 2 from "cuda:2" asked for, 2 present`)
	assert.ErrorIs(t, err, pinned.ErrNoDevice)

	t.Setenv(pinned.EnvBackend, "cpu")
	s, err = pinned.Select("")
	require.NoError(t, err)
	assert.Equal(t, "cpu", s.Backend.Name())

	for spec, msg := range map[string]string{
		"rocm":    `backend "rocm": want auto, hip, cuda or cpu`,
		"cuda:x":  `backend "cuda:x": ordinal "x" is not a device number`,
		"cuda:-1": `ordinal "-1" is not a device number`,
	} {
		_, err := pinned.Select(spec)
		assert.ErrorContains(t, err, msg)
	}
}

func TestSelectDeviceFromTheLaunchersLocalRank(t *testing.T) {
	for _, tc := range []struct {
		name   string
		env    []string
		spec   string
		device int
		reason string // the Reason ends with it
	}{
		{"srun", []string{"SLURM_LOCALID", "1"}, "cuda", 1, "using device 1 from SLURM_LOCALID"},
		{"torchrun", []string{"LOCAL_RANK", "1"}, "cuda", 1, "using device 1 from LOCAL_RANK"},
		{"Open MPI mpirun", []string{"OMPI_COMM_WORLD_LOCAL_RANK", "1"}, "cuda", 1, "using device 1 from OMPI_COMM_WORLD_LOCAL_RANK"},
		{"hydra mpiexec", []string{"MPI_LOCALRANKID", "1"}, "cuda", 1, "using device 1 from MPI_LOCALRANKID"},
		{"Cray PALS", []string{"PMI_LOCAL_RANK", "1"}, "cuda", 1, "using device 1 from PMI_LOCAL_RANK"},
		{"torchrun under srun",
			[]string{"SLURM_PROCID", "0", "SLURM_NTASKS", "2", "SLURM_LOCALID", "0", "RANK", "1", "WORLD_SIZE", "4", "LOCAL_RANK", "1"},
			"cuda", 1, "using device 1 from LOCAL_RANK"},
		{"Open MPI mpirun under salloc",
			[]string{"SLURM_PROCID", "0", "SLURM_NTASKS", "1", "SLURM_LOCALID", "0",
				"OMPI_COMM_WORLD_RANK", "1", "OMPI_COMM_WORLD_SIZE", "2", "OMPI_COMM_WORLD_LOCAL_RANK", "1"},
			"auto", 1, "auto: " + "%s loaded, 2 device(s), using device 1 from OMPI_COMM_WORLD_LOCAL_RANK"},
		{"hydra: MPI_LOCALRANKID before PMI_LOCAL_RANK",
			[]string{"PMI_RANK", "1", "PMI_SIZE", "2", "PMI_LOCAL_RANK", "0", "MPI_LOCALRANKID", "1"},
			"cuda", 1, "using device 1 from MPI_LOCALRANKID"},
		{"single process", nil, "cuda", 0, "using device 0 by default"},
		{"an ordinal wins", []string{"SLURM_LOCALID", "1"}, "cuda:0", 0, `using device 0 from "cuda:0"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			useFake(t)
			t.Setenv("TB_FAKE_DEVICES", "2")
			for i := 0; i < len(tc.env); i += 2 {
				t.Setenv(tc.env[i], tc.env[i+1])
			}
			s, err := pinned.Select(tc.spec)
			require.NoError(t, err)
			require.Equal(t, "cuda", s.Backend.Name(), s.Reason)
			assert.Equal(t, tc.device, s.Backend.(*pinned.GPU).Device())
			reason := strings.ReplaceAll(tc.reason, "%s", fakecudart.Path(t))
			assert.True(t, strings.HasSuffix(s.Reason, reason), "reason %q, want it to end with %q", s.Reason, reason)
		})
	}
}

func TestSelectLocalRankBeyondTheDevices(t *testing.T) {
	useFake(t)
	t.Setenv("SLURM_LOCALID", "3")
	t.Setenv("CUDA_VISIBLE_DEVICES", "3")

	// Slurm's --gpus-per-task: each rank sees its own GPU as device 0.
	t.Setenv("TB_FAKE_DEVICES", "1")
	for _, spec := range []string{"cuda", "auto"} {
		s, err := pinned.Select(spec)
		require.NoError(t, err)
		require.Equal(t, "cuda", s.Backend.Name(), s.Reason)
		assert.Equal(t, 0, s.Backend.(*pinned.GPU).Device())
		assert.Contains(t, s.Reason, "1 device(s), using device 0: SLURM_LOCALID=3 but only one device is visible (CUDA_VISIBLE_DEVICES=3)")
	}
	_, err := pinned.Select("cuda:3")
	assert.ErrorContains(t, err, `device 3 from "cuda:3" asked for, 1 present`, "an explicit ordinal is never moved")

	// Two devices visible and no fourth: which one is ambiguous.
	pinned.ResetSelections()
	t.Setenv("TB_FAKE_DEVICES", "2")
	_, err = pinned.Select("cuda")
	assert.ErrorContains(t, err, "pinned: backend cuda asked for: ")
	assert.ErrorContains(t, err, "no GPU device: device 3 from SLURM_LOCALID asked for, 2 present")
	assert.ErrorIs(t, err, pinned.ErrNoDevice)
	s, err := pinned.Select("auto")
	require.NoError(t, err)
	assert.Equal(t, "cpu", s.Backend.Name())
	assert.Contains(t, s.Reason, "auto fell back to cpu: ")
	assert.Contains(t, s.Reason, "device 3 from SLURM_LOCALID asked for, 2 present")
}

func TestSelectBadLocalRankNamesTheVariable(t *testing.T) {
	useFake(t)
	t.Setenv("SLURM_LOCALID", "two")
	_, err := pinned.Select("auto")
	assert.EqualError(t, err, `pinned: backend "auto": SLURM_LOCALID="two" is not a local rank: want a number >= 0`)

	s, err := pinned.Select("cpu")
	require.NoError(t, err, "cpu has no device to pick")
	assert.Equal(t, "cpu", s.Backend.Name())
}

func TestSelectionString(t *testing.T) {
	useFake(t)
	t.Setenv("TB_FAKE_DEVICES", "2")
	t.Setenv("SLURM_LOCALID", "1")
	s, err := pinned.Select("cuda")
	require.NoError(t, err)
	assert.Equal(t, "cuda:1 ("+fakecudart.Path(t)+" loaded, 2 device(s), using device 1 from SLURM_LOCALID)", s.String())

	s, err = pinned.Select("cpu")
	require.NoError(t, err)
	assert.Equal(t, "cpu (cpu asked for)", s.String())
	assert.Equal(t, "cpu (cpu asked for)", fmt.Sprint(s))

	assert.Equal(t, "none", pinned.Selection{}.String())
}

func gpu(t *testing.T) *pinned.GPU {
	useFake(t)
	s, err := pinned.Select("cuda")
	require.NoError(t, err)
	return s.Backend.(*pinned.GPU)
}

// copyOut fills a pooled host buffer with v, copies it to dev on s, and
// records the buffer's event.
func copyOut(t *testing.T, g *pinned.GPU, b *pinned.Buffer, dev *pinned.Buffer, v byte, s uintptr) {
	for i := range b.Bytes() {
		b.Bytes()[i] = v
	}
	rt := g.Runtime()
	require.NoError(t, rt.CopyToDeviceAsync(dev.Device(), b.Bytes(), streamOf(s)))
	require.NoError(t, rt.EventRecord(b.Event(), streamOf(s)))
}

func TestGPUPoolReusesHostBufferOnlyAfterItsCopy(t *testing.T) {
	g := gpu(t)
	rt := g.Runtime()
	t.Setenv("TB_FAKE_COPY_DELAY_US", "200000")
	s, err := g.NewStream()
	require.NoError(t, err)
	defer rt.StreamDestroy(s)
	devs := pinned.NewDevicePool(g, 0)
	ctx := context.Background()
	const n = 1 << 16

	check := func(fenced bool) (deviceHolds byte) {
		host := pinned.NewPool(g, 0)
		defer func() {
			require.NoError(t, host.Close())
			assert.Zero(t, host.Stats().Allocated)
		}()
		a, err := host.Get(ctx, n)
		require.NoError(t, err)
		require.NotZero(t, a.Event())
		d, err := devs.Get(ctx, n)
		require.NoError(t, err)
		copyOut(t, g, a, d, 'X', uintptr(s))
		var f pinned.Fence
		if fenced {
			f = g.Fence(a.Event())
		}
		require.NoError(t, host.Put(a, f))
		// The next batch's host buffer is written at once.
		b, err := host.Get(ctx, n)
		require.NoError(t, err)
		for i := range b.Bytes() {
			b.Bytes()[i] = 'Y'
		}
		require.NoError(t, rt.StreamSynchronize(s))
		back := make([]byte, n)
		require.NoError(t, rt.CopyToHost(back, d.Device()))
		require.NoError(t, host.Put(b, nil))
		require.NoError(t, devs.Put(d, nil))
		return back[n-1]
	}
	assert.Equal(t, byte('X'), check(true), "the fenced buffer kept its data until the copy read it")
	// The negative control: without the fence the fake runtime shows the
	// corruption a real GPU would.
	assert.Equal(t, byte('Y'), check(false), "the fake runtime did not expose an early reuse")

	require.NoError(t, devs.Close())
	assert.Zero(t, devs.Stats().Allocated)
}

func TestRealRuntimesFallBackQuietly(t *testing.T) {
	if os.Getenv("TB_SELECT_CHILD") == "1" {
		s, err := pinned.Select("auto")
		require.NoError(t, err)
		require.Equal(t, "cpu", s.Backend.Name(), s.Reason)
		return
	}
	if !csrc.Cgo {
		t.Skip("built without cgo: no runtime loads (TestWithoutCgoAutoIsCPU)")
	}
	if runtime.GOOS+"/"+runtime.GOARCH != "linux/amd64" {
		t.Skipf("Debian's runtimes are linux/amd64 libraries; this is %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	for _, lib := range []string{"/usr/lib/x86_64-linux-gnu/libamdhip64.so.5", "/usr/lib/x86_64-linux-gnu/libcudart.so.11.0"} {
		if _, err := os.Stat(lib); err != nil {
			t.Skipf("%s is not installed: scripts/install-deps.sh installs libamdhip64-dev and libcudart11.0", lib)
		}
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestRealRuntimesFallBackQuietly$", "-test.count=1")
	cmd.Env = append(os.Environ(), "TB_SELECT_CHILD=1", pinned.EnvBackend+"=", pinned.EnvHIPLib+"=", pinned.EnvCUDALib+"=")
	for _, v := range launch.Vars() {
		cmd.Env = append(cmd.Env, v+"=")
	}
	var stderr, stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "child: %s %s", stdout.String(), stderr.String())
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	require.Len(t, lines, 1, "stderr: %q", stderr.String())
	assert.Contains(t, lines[0], "tensorbatch: backend backend=cpu")
	assert.Contains(t, lines[0], "hipErrorNoDevice (100)", "the real ROCm 5.2 reports no device")
	assert.Regexp(t, `cudaErrorInsufficientDriver \(35\)|cudaErrorNoDevice \(100\)`, lines[0], "the real CUDA runtime reports no driver")
	t.Log(lines[0])
}

func streamOf(s uintptr) csrc.Stream { return csrc.Stream(s) }

func TestWriteCombinedReachesTheRuntime(t *testing.T) {
	g := gpu(t)
	t.Setenv("TB_FAKE_NO_WC", "1") // the fake refuses the write-combined flag
	wc := pinned.NewPool(g, 0, pinned.WriteCombined())
	_, err := wc.Get(context.Background(), 4096)
	assert.ErrorContains(t, err, "pinned: cuda write-combined host alloc of 4096 bytes")
	assert.ErrorContains(t, err, "cudaHostAlloc: cudaErrorInvalidValue (1)")
	plain := pinned.NewPool(g, 0)
	b, err := plain.Get(context.Background(), 4096)
	require.NoError(t, err, "without the flag the same runtime allocates")
	require.NoError(t, plain.Put(b, nil))
	require.NoError(t, plain.Close())
	require.NoError(t, wc.Close())
	cpu := pinned.NewPool(pinned.CPU{}, 0, pinned.WriteCombined())
	b, err = cpu.Get(context.Background(), 10)
	require.NoError(t, err, "the cpu backend ignores the option")
	require.NoError(t, cpu.Put(b, nil))
	require.NoError(t, cpu.Close())
}
