package csrc

import (
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"

	"github.com/klauspost/cpuid/v2"
)

// Kernels is an implementation of the collation and image kernels: the
// plain Go reference (which packages collate and vision run themselves) or
// one of the C ones. The C kernels take it as their first argument; its
// values are tb_kernels.h's TB_PATH_* (KernelsGo has no C code: given to a
// C kernel, it runs the scalar one). Package collate exposes the same
// numbering as collate.Kernels.
type Kernels int

// The implementations, slowest first.
const (
	KernelsGo     Kernels = iota // the Go reference
	KernelsScalar                // baseline C
	KernelsAVX2                  // AVX2 and F16C
	KernelsAVX512                // AVX-512 F, BW and VL
)

var kernelNames = [...]string{"go", "scalar", "avx2", "avx512"}

func (k Kernels) String() string {
	if k < KernelsGo || k > KernelsAVX512 {
		return fmt.Sprintf("Kernels(%d)", int(k))
	}
	return kernelNames[k]
}

// EnvKernels forces the kernels: go, scalar, avx2 or avx512 (collate's
// EnvKernels).
const EnvKernels = "TENSORBATCH_KERNELS"

var cpu = struct{ avx2, avx512 bool }{
	avx2:   cpuid.CPU.Supports(cpuid.AVX2, cpuid.F16C),
	avx512: cpuid.CPU.Supports(cpuid.AVX512F, cpuid.AVX512BW, cpuid.AVX512VL, cpuid.AVX2, cpuid.F16C),
}

// AvailableKernels returns the kernels this CPU runs, fastest last: go
// alone in a binary built without cgo, which has no C kernels.
func AvailableKernels() []Kernels {
	if !Cgo {
		return []Kernels{KernelsGo}
	}
	k := []Kernels{KernelsGo, KernelsScalar}
	if cpu.avx2 {
		k = append(k, KernelsAVX2)
	}
	if cpu.avx512 {
		k = append(k, KernelsAVX512)
	}
	return k
}

// active holds the kernels that collate and vision run: one place for the
// whole process. Each kernel call loads it once, so it runs wholly on one
// implementation even while SetKernels changes it.
var active atomic.Int32

func init() { active.Store(int32(chooseKernels(os.Getenv(EnvKernels)))) }

// chooseKernels returns the kernels want names, or the fastest available
// (with a warning when want names none this CPU runs).
func chooseKernels(want string) Kernels {
	avail := AvailableKernels()
	best := avail[len(avail)-1]
	if want == "" {
		return best
	}
	for _, k := range avail {
		if k.String() == want {
			return k
		}
	}
	slog.Warn("tensorbatch: "+EnvKernels+" names kernels this CPU cannot run; using the best ones", "asked", want, "using", best.String())
	return best
}

// ActiveKernels returns the kernels that run.
func ActiveKernels() Kernels { return Kernels(active.Load()) }

// SetKernels makes k the kernels that run, for tests and benchmarks, and
// returns a function that restores the previous ones. It fails, changing
// nothing, if this binary or CPU cannot run k. SetKernels and restore are
// safe for concurrent use with each other and with the kernels: a kernel
// call runs wholly on the kernels active when it began.
func SetKernels(k Kernels) (restore func(), err error) {
	ok := false
	for _, a := range AvailableKernels() {
		ok = ok || a == k
	}
	switch {
	case !ok && !Cgo && k >= KernelsScalar && k <= KernelsAVX512:
		return nil, fmt.Errorf("csrc: SetKernels(%s): %w: the C kernels are not in this binary", k, ErrNoCgo)
	case !ok:
		return nil, fmt.Errorf("csrc: SetKernels(%s): this CPU cannot run them", k)
	}
	old := active.Swap(int32(k))
	return func() { active.Store(old) }, nil
}
