package corpus

import "github.com/tensorbatch/tensorbatch/internal/regfile"

// Only regular files are read, every file this package reads (a token
// file, a Megatron .idx and .bin): a FIFO, device, socket or directory,
// or a link to one, is refused without blocking, before a byte is read,
// with an error naming the path and what it is.
var (
	// ErrNotRegular is wrapped by the error of a path that is not a
	// regular file. It is vision.ErrNotRegular and shards.ErrNotRegular.
	ErrNotRegular = regfile.ErrNotRegular
	// ErrFileTooLarge is wrapped by the error of a file read whole (a
	// Megatron .idx) larger than its bound. It is vision.ErrFileTooLarge
	// and shards.ErrFileTooLarge.
	ErrFileTooLarge = regfile.ErrTooLarge
)
