package shards

import "github.com/tensorbatch/tensorbatch/internal/regfile"

// Only regular files are read, every file this package reads locally (a
// shard, a shard list, a cached shard and its .meta): a FIFO, device, socket or directory, or a
// link to one, is refused without blocking, before a byte is read, with
// an error naming the path and what it is.
var (
	// ErrNotRegular is wrapped by the error of a local path that is not
	// a regular file. It is vision.ErrNotRegular.
	ErrNotRegular = regfile.ErrNotRegular
	// ErrFileTooLarge is wrapped by the error of a file read whole (a
	// .meta) larger than its bound. It is
	// vision.ErrFileTooLarge.
	ErrFileTooLarge = regfile.ErrTooLarge
)

// maxMetaBytes bounds a cached shard's .meta file: its URL, size and
// ETag in JSON take well under a KiB.
const maxMetaBytes = 1 << 20
