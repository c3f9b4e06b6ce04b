// Package csrc is tensorbatch's C core and its thin, low-level Go binding:
// a GPU runtime (CUDA's libcudart or HIP's libamdhip64) loaded at run time
// with dlopen (LoadLibrary on Windows) into a function-pointer table, so one
// binary runs with or without a GPU and needs no GPU headers to build; the
// SIMD collation kernels; and the image kernels (libjpeg-turbo loaded at run
// time, resampling per a Plan). It is internal: packages pinned, collate and
// vision wrap it in idiomatic APIs and name the few types their users hold.
//
// A binary built without cgo has the same API (nocgo.go declares every
// identifier the cgo files do): Cgo is false, Open, OpenJPEG and
// NewImageDecoder fail with ErrNoCgo, and the C kernels panic, so callers
// run their Go references (AvailableKernels offers only KernelsGo there).
// Kernels, Plan and the active-kernels state are the same in every build.
//
// Only flat values cross the boundary. Device pointers, streams and events
// are uintptr handles owned by the runtime; Go never dereferences them.
// Host memory passed to an asynchronous copy must be runtime-allocated
// (HostAlloc), never Go memory. Every call returns an error that carries
// the runtime's code and message.
package csrc
