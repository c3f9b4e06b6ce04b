package pinned

import (
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/tensorbatch/tensorbatch/csrc"
)

// Environment variables that steer Select.
const (
	EnvBackend = "TENSORBATCH_BACKEND"  // auto|hip|cuda|cpu, optionally :ordinal
	EnvHIPLib  = "TENSORBATCH_HIP_LIB"  // a libamdhip64 path, tried instead of the defaults
	EnvCUDALib = "TENSORBATCH_CUDA_LIB" // a libcudart path, tried instead of the defaults
)

// The library names tried, in order, when no path is forced.
var (
	HIPLibs  = []string{"libamdhip64.so", "libamdhip64.so.7", "libamdhip64.so.6", "libamdhip64.so.5"}
	CUDALibs = []string{"libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0", "libcudart.so"}
)

// Selection is the backend Select chose and why.
type Selection struct {
	Backend Backend
	Reason  string
}

var (
	selMu    sync.Mutex
	selected = map[string]Selection{}
)

// Select returns the backend that spec names: "auto", "hip", "cuda" or
// "cpu", with an optional ":ordinal" ("cuda:1"). An empty spec means
// $TENSORBATCH_BACKEND, else "auto". Without an ordinal the device is
// $LOCAL_RANK, else 0. auto tries HIP, then CUDA, and falls back to cpu
// when a library is missing, reports no device, or fails any call of the
// probe; an explicit hip or cuda that fails is an error. The result is
// cached per spec and logged once.
func Select(spec string) (Selection, error) {
	if spec == "" {
		spec = os.Getenv(EnvBackend)
	}
	if spec == "" {
		spec = "auto"
	}
	name, device, err := parseSpec(spec)
	if err != nil {
		return Selection{}, err
	}
	key := fmt.Sprintf("%s:%d", name, device)
	selMu.Lock()
	defer selMu.Unlock()
	if s, ok := selected[key]; ok {
		return s, nil
	}
	s, err := choose(name, device)
	if err != nil {
		return Selection{}, err
	}
	selected[key] = s
	slog.Info("tensorbatch: backend", "backend", s.Backend.Name(), "reason", s.Reason)
	return s, nil
}

// parseSpec splits "name[:ordinal]"; the ordinal defaults to $LOCAL_RANK.
func parseSpec(spec string) (name string, device int, err error) {
	name, ord, hasOrd := strings.Cut(strings.ToLower(strings.TrimSpace(spec)), ":")
	switch name {
	case "auto", "hip", "cuda", "cpu":
	default:
		return "", 0, fmt.Errorf("pinned: backend %q: want auto, hip, cuda or cpu, optionally with :ordinal", spec)
	}
	if !hasOrd {
		ord = os.Getenv("LOCAL_RANK")
		if ord == "" {
			return name, 0, nil
		}
	}
	device, err = strconv.Atoi(ord)
	if err != nil || device < 0 {
		src := "ordinal"
		if !hasOrd {
			src = "LOCAL_RANK"
		}
		return "", 0, fmt.Errorf("pinned: backend %q: %s %q is not a device number", spec, src, ord)
	}
	return name, device, nil
}

func choose(name string, device int) (Selection, error) {
	switch name {
	case "cpu":
		return Selection{CPU{}, "cpu asked for"}, nil
	case "hip", "cuda":
		kind := csrc.CUDA
		if name == "hip" {
			kind = csrc.HIP
		}
		g, why, err := open(kind, device)
		if err != nil {
			return Selection{}, fmt.Errorf("pinned: backend %s asked for: %w", name, err)
		}
		return Selection{g, why}, nil
	}
	var reasons []string
	for _, kind := range []csrc.Kind{csrc.HIP, csrc.CUDA} {
		g, why, err := open(kind, device)
		if err == nil {
			return Selection{g, "auto: " + why}, nil
		}
		reasons = append(reasons, fmt.Sprintf("%s: %v", kind, err))
	}
	return Selection{CPU{}, "auto fell back to cpu: " + strings.Join(reasons, "; ")}, nil
}

// open loads kind's runtime and probes device; the first library that
// loads decides.
func open(kind csrc.Kind, device int) (*GPU, string, error) {
	env, libs := EnvCUDALib, CUDALibs
	if kind == csrc.HIP {
		env, libs = EnvHIPLib, HIPLibs
	}
	if p := os.Getenv(env); p != "" {
		libs = []string{p}
	}
	var missing []string
	for _, lib := range libs {
		rt, err := csrc.Open(kind, lib)
		if err != nil {
			missing = append(missing, lib)
			continue
		}
		// A runtime is never unloaded: some do not survive dlclose.
		n, err := rt.DeviceCount()
		switch {
		case err != nil:
			return nil, "", fmt.Errorf("%s: %w", lib, err)
		case n == 0:
			return nil, "", fmt.Errorf("%s: %w: device count is 0", lib, ErrNoDevice)
		case device >= n:
			return nil, "", fmt.Errorf("%s: %w: device %d asked for, %d present", lib, ErrNoDevice, device, n)
		}
		g := &GPU{rt: rt, device: device}
		if err := g.probe(); err != nil {
			return nil, "", fmt.Errorf("%s: probe of device %d: %w", lib, device, err)
		}
		return g, fmt.Sprintf("%s loaded, %d device(s), using %d", lib, n, device), nil
	}
	return nil, "", fmt.Errorf("no library loads (tried %s)", strings.Join(missing, ", "))
}

// ErrNoDevice is matched by errors that mean there is no usable GPU.
var ErrNoDevice = csrc.ErrNoDevice

// resetSelections forgets cached selections (tests only).
func resetSelections() {
	selMu.Lock()
	defer selMu.Unlock()
	selected = map[string]Selection{}
}
