// Package datasets provides the standard small image datasets, read from
// the files their publishers ship, as engine Datasets: MNIST and
// Fashion-MNIST (IDX files, gzipped or not) and CIFAR-10 (the binary
// version), as torchvision.datasets does for PyTorch. A split is read into
// memory once (uint8 pixels); Dataset writes each sample into its place in
// the batch as float32 in [0, 1].
//
// Sizes in a file's header are checked against the bytes that exist before
// anything is allocated from them, so a corrupt or hostile file fails with an
// error that names it. Only regular files are read: a FIFO, device, socket
// or directory (or a link to one, such as /dev/zero) fails with
// ErrNotRegular, without blocking.
//
// A Dataset's Fingerprint (engine.Fingerprinter), which a loader's State
// records, names the images' shape, their pixels and labels (sampled
// hashes of the bytes in memory) and Flip, so a job resumed on another
// split or data set is refused.
package datasets
