// Package gomlx provides a GoMLX train.Dataset over a tensorbatch Loader,
// so that GoMLX's training loop (train.Loop, Trainer.Eval) pulls its
// batches from tensorbatch's workers.
//
// Conventions: each Yield copies every yielded field of the pinned batch
// once, straight into a buffer of the GoMLX backend, and releases the batch;
// that copy is the only one (GoMLX buffers own their memory, so it cannot
// be zero). A Dataset runs one epoch of the Loader at a time; Reset moves it
// to the next epoch, and Close ends the running one. It lives in its own
// module, so tensorbatch's core never depends on GoMLX.
package gomlx
