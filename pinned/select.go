package pinned

import (
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/tensorbatch/tensorbatch/internal/csrc"
	"github.com/tensorbatch/tensorbatch/internal/launch"
)

// Environment variables that steer Select.
const (
	EnvBackend = "TENSORBATCH_BACKEND"  // auto|hip|cuda|cpu, optionally :ordinal
	EnvHIPLib  = "TENSORBATCH_HIP_LIB"  // a libamdhip64 path, tried instead of the defaults
	EnvCUDALib = "TENSORBATCH_CUDA_LIB" // a libcudart path, tried instead of the defaults
)

// Selection is the backend Select chose and why.
type Selection struct {
	Backend Backend
	Reason  string
}

// String returns the backend, with its device for a GPU, and the reason:
// "cuda:1 (libcudart.so.12 loaded, 2 device(s), using device 1 from
// SLURM_LOCALID)", "cpu (cpu asked for)".
func (s Selection) String() string {
	switch b := s.Backend.(type) {
	case nil:
		return "none"
	case *GPU:
		return fmt.Sprintf("%s:%d (%s)", b.Name(), b.Device(), s.Reason)
	default:
		return fmt.Sprintf("%s (%s)", b.Name(), s.Reason)
	}
}

var (
	selMu    sync.Mutex
	selected = map[string]Selection{}
)

// Select returns the backend that spec names: "auto", "hip", "cuda" or
// "cpu", with an optional ":ordinal" ("cuda:1"). An empty spec means
// $TENSORBATCH_BACKEND, else "auto".
//
// Without an ordinal the device is the local rank exported by the launcher
// that started the process (torchrun, Open MPI, MPICH or Intel MPI, Slurm;
// the innermost wins when they nest: docs/distributed.md lists the
// variables), else 0. When that local rank is not below the
// number of devices but exactly one device is visible, as when
// CUDA_VISIBLE_DEVICES or HIP_VISIBLE_DEVICES gives each rank its own
// GPU, the device is 0. The Reason says where the device came from.
//
// auto tries HIP, then CUDA, and falls back to cpu when a library is
// missing, reports no device (or not the one wanted), or fails any call of
// the probe; an explicit hip or cuda that fails is an error. A binary built
// without cgo loads no library: auto is cpu with the reason "built without
// cgo", and hip or cuda is an error matching ErrNoCgo. The result is
// cached per spec and device and logged once.
func Select(spec string) (Selection, error) {
	if spec == "" {
		spec = os.Getenv(EnvBackend)
	}
	if spec == "" {
		spec = "auto"
	}
	name, dev, err := parseSpec(spec)
	if err != nil {
		return Selection{}, err
	}
	key := fmt.Sprintf("%s:%d", name, dev.n)
	if dev.local {
		key += " from " + dev.from
	}
	selMu.Lock()
	defer selMu.Unlock()
	if s, ok := selected[key]; ok {
		return s, nil
	}
	s, err := choose(name, dev)
	if err != nil {
		return Selection{}, err
	}
	selected[key] = s
	slog.Info("tensorbatch: backend", "backend", s.Backend.Name(), "reason", s.Reason)
	return s, nil
}

// wantDevice is the device Select is asked for and where that came from.
type wantDevice struct {
	n     int
	from  string // the spec (quoted) or the local rank's variable; "" by default
	local bool   // n is the launcher's local rank
}

func (d wantDevice) String() string {
	if d.from == "" {
		return fmt.Sprintf("device %d by default", d.n)
	}
	return fmt.Sprintf("device %d from %s", d.n, d.from)
}

// parseSpec splits "name[:ordinal]"; the ordinal defaults to the
// launcher's local rank, else 0. cpu has no device.
func parseSpec(spec string) (name string, dev wantDevice, err error) {
	name, ord, hasOrd := strings.Cut(strings.ToLower(strings.TrimSpace(spec)), ":")
	switch name {
	case "auto", "hip", "cuda", "cpu":
	default:
		return "", dev, fmt.Errorf("pinned: backend %q: want auto, hip, cuda or cpu, optionally with :ordinal", spec)
	}
	switch {
	case hasOrd:
		n, err := strconv.Atoi(ord)
		if err != nil || n < 0 {
			return "", dev, fmt.Errorf("pinned: backend %q: ordinal %q is not a device number", spec, ord)
		}
		return name, wantDevice{n: n, from: strconv.Quote(spec)}, nil
	case name == "cpu":
		return name, dev, nil
	}
	n, from, ok, err := launch.LocalRank()
	if err != nil {
		return "", dev, fmt.Errorf("pinned: backend %q: %w", spec, err)
	}
	return name, wantDevice{n: n, from: from, local: ok}, nil
}

func choose(name string, dev wantDevice) (Selection, error) {
	switch {
	case name == "cpu":
		return Selection{CPU{}, "cpu asked for"}, nil
	case !csrc.Cgo && name == "auto":
		return Selection{CPU{}, csrc.ErrNoCgo.Error()}, nil
	case !csrc.Cgo:
		return Selection{}, fmt.Errorf("pinned: backend %s asked for: %w", name, csrc.ErrNoCgo)
	case name == "hip" || name == "cuda":
		kind := csrc.CUDA
		if name == "hip" {
			kind = csrc.HIP
		}
		g, why, err := open(kind, dev)
		if err != nil {
			return Selection{}, fmt.Errorf("pinned: backend %s asked for: %w", name, err)
		}
		return Selection{g, why}, nil
	}
	var reasons []string
	for _, kind := range []csrc.Kind{csrc.HIP, csrc.CUDA} {
		g, why, err := open(kind, dev)
		if err == nil {
			return Selection{g, "auto: " + why}, nil
		}
		reasons = append(reasons, fmt.Sprintf("%s: %v", kind, err))
	}
	return Selection{CPU{}, "auto fell back to cpu: " + strings.Join(reasons, "; ")}, nil
}

// visibleEnv lists the variables that narrow each runtime's devices.
var visibleEnv = map[csrc.Kind][]string{
	csrc.CUDA: {"CUDA_VISIBLE_DEVICES"},
	csrc.HIP:  {"HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"},
}

// open loads kind's runtime and probes the device dev asks for; the first
// library that loads decides. A local rank beyond the devices present
// means device 0 when exactly one is visible.
func open(kind csrc.Kind, dev wantDevice) (*GPU, string, error) {
	env, libs := EnvCUDALib, cudaLibs
	if kind == csrc.HIP {
		env, libs = EnvHIPLib, hipLibs
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
		device, why := dev.n, dev.String()
		switch {
		case err != nil:
			return nil, "", fmt.Errorf("%s: %w", lib, err)
		case n == 0:
			return nil, "", fmt.Errorf("%s: %w: device count is 0", lib, ErrNoDevice)
		case device >= n && dev.local && n == 1:
			device = 0
			why = fmt.Sprintf("device 0: %s=%d but only one device is visible", dev.from, dev.n)
			for _, v := range visibleEnv[kind] {
				if val := os.Getenv(v); val != "" {
					why += fmt.Sprintf(" (%s=%s)", v, val)
					break
				}
			}
		case device >= n:
			return nil, "", fmt.Errorf("%s: %w: %s asked for, %d present", lib, ErrNoDevice, why, n)
		}
		g := &GPU{rt: rt, device: device}
		if err := g.probe(); err != nil {
			return nil, "", fmt.Errorf("%s: probe of device %d: %w", lib, device, err)
		}
		return g, fmt.Sprintf("%s loaded, %d device(s), using %s", lib, n, why), nil
	}
	return nil, "", fmt.Errorf("no library loads (tried %s)", strings.Join(missing, ", "))
}

// Sentinel errors, matched with errors.Is.
var (
	// ErrNoDevice is matched by errors that mean there is no usable GPU:
	// a *RuntimeError of no device, an invalid device or no driver, and
	// Select's errors for a device that is not there.
	ErrNoDevice = csrc.ErrNoDevice

	// ErrNoCgo is matched by the error of a hip or cuda backend asked for
	// in a binary built without cgo, which loads no GPU runtime.
	ErrNoCgo = csrc.ErrNoCgo
)

// resetSelections forgets cached selections (tests only).
func resetSelections() {
	selMu.Lock()
	defer selMu.Unlock()
	selected = map[string]Selection{}
}
