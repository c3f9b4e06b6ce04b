// Package csrc is tensorbatch's C core and its thin, low-level Go binding:
// a GPU runtime (CUDA's libcudart or HIP's libamdhip64) loaded at run time
// with dlopen (LoadLibrary on Windows) into a function-pointer table, so one
// binary runs with or without a GPU and needs no GPU headers to build. A
// binary built without cgo has the same API: Cgo is false, Open fails with
// ErrNoCgo and the C kernels are absent.
//
// Only flat values cross the boundary. Device pointers, streams and events
// are uintptr handles owned by the runtime; Go never dereferences them.
// Host memory passed to an asynchronous copy must be runtime-allocated
// (HostAlloc), never Go memory. Every call returns an error that carries
// the runtime's code and message. Packages pinned and collate wrap this in
// idiomatic APIs.
package csrc
