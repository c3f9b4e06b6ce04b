package shards

import "github.com/tensorbatch/tensorbatch/internal/regfile"

// Only regular files are read, every file this package reads locally (a
// shard, a shard list, a cached shard and its .meta, a token file, a
// Megatron .idx and .bin): a FIFO, device, socket or directory, or a
// link to one, is refused without blocking, before a byte is read, with
// an error naming the path and what it is.
var (
	// ErrNotRegular is wrapped by the error of a local path that is not
	// a regular file. It is vision.ErrNotRegular.
	ErrNotRegular = regfile.ErrNotRegular
	// ErrFileTooLarge is wrapped by the error of a file read whole (a
	// .meta, a Megatron .idx) larger than its bound. It is
	// vision.ErrFileTooLarge.
	ErrFileTooLarge = regfile.ErrTooLarge
)

// maxMetaBytes bounds a cached shard's .meta file: its URL, size and
// ETag in JSON take well under a KiB.
const maxMetaBytes = 1 << 20

// maxMegatronIndexBytes bounds a Megatron .idx, read whole: the largest
// one Megatron writes, for 2^31 sequences (the most the format allows),
// about 42 GiB: a 34-byte header, 12 bytes a sequence (length and
// pointer), 8 a document (at most one more than the sequences) and, in a
// multimodal index, 1 a sequence (its mode). A larger file is refused
// before anything is allocated.
const maxMegatronIndexBytes = 34 + 12*(1<<31) + 8*(1<<31+1) + 1<<31
