package regfile

import "os"

// A Mapping is a regular file opened for reading and, where the system
// and file system allow, mapped read-only into memory.
type Mapping struct {
	// File is the open file, for ReadAt where Data is nil.
	File *os.File
	// Size is the file's size when it was opened.
	Size int64
	// Data is the mapping of the file's Size bytes; nil where it is not
	// mapped (an empty file, a system or file system that cannot map, a
	// size past the address space). A file cut short while mapped makes
	// a read of the lost pages fault (SIGBUS): see debug.SetPanicOnFault.
	Data []byte
}

// Map opens the regular file at path as Open does, then maps it
// read-only. A file that cannot be mapped is not an error: its Mapping
// has no Data, and is read with File.ReadAt.
func Map(path string) (*Mapping, error) {
	f, size, err := open(path)
	if err != nil {
		return nil, err
	}
	m := &Mapping{File: f, Size: size}
	if size > 0 && int64(int(size)) == size {
		if data, err := mmap(f.Fd(), int(size)); err == nil {
			m.Data = data
		}
	}
	return m, nil
}

// Close unmaps the file and closes it.
func (m *Mapping) Close() error {
	var err error
	if m.Data != nil {
		err = munmap(m.Data)
		m.Data = nil
	}
	if cerr := m.File.Close(); err == nil {
		err = cerr
	}
	return err
}
