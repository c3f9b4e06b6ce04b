// Package regfile provides the one way the library opens a file to read
// it. Only regular files are read: a path is opened without blocking (a
// FIFO cannot hang the open), and the opened descriptor is checked with
// fstat, so a directory, FIFO, socket or device, a link to one (a
// symlink to /dev/zero) or one swapped in after any earlier check is
// refused before a byte is read. Where a whole file is read, its size is
// checked against a byte bound before anything is allocated, and the
// read stays within the bound however the file grows.
//
// Open opens a file to read as it goes (a shard, read in place); ReadFile
// reads one whole (an index, a .meta, a list); Buffer.Read reads one
// whole into memory it reuses, with no allocation on Linux (an image);
// Map maps one read-only (a token file). WriteFile writes a small file
// whole (a shard list), by a temporary file renamed over it, so that a
// FIFO or link in its place is replaced, never opened. Other writes are
// not this package's: the shard cache writes its downloads and lock
// files itself, and shards, through temporary files of random names.
//
// Errors are *fs.PathError values naming the path: a file of another
// kind wraps ErrNotRegular and says what it is ("a named pipe (FIFO)",
// "a character device", ...), a file over the bound wraps ErrTooLarge,
// a path with a NUL byte wraps fs.ErrInvalid, and the system's own errors
// (fs.ErrNotExist, fs.ErrPermission) are kept.
//
// TestOnlyOneWayToOpenAFile reads the module's code and fails where a
// file is opened or mapped any other way.
package regfile
