// Package vision provides image datasets and transforms for the engine:
// torchvision's ImageFolder and a file list, and its classic transforms
// (RandomResizedCrop, RandomHorizontalFlip, Resize, CenterCrop, ToTensor,
// Normalize) fused into one pass from the compressed file to the sample's
// place in the pinned batch.
//
// The fused pass is a Pipeline: compressed bytes from any source in, one
// sample's image field out. ImageFolder, FileList and New are lists of
// files over one Pipeline; Pipeline.Record decodes the records of
// WebDataset shards (package shards) with it. The same bytes, Transform
// and RNG give the same bits whichever source they come from.
//
// JPEGs are decoded by libjpeg-turbo, loaded at run time (libjpeg.so.62,
// Debian's libjpeg62-turbo), only over the rows and columns the crop
// needs; Go's image/jpeg is the fallback where it cannot be loaded or cgo
// is off, and JPEGDecoderInfo says which one runs and why. PNG, the rest of
// torchvision's extensions (BMP, TIFF, WebP, PPM and PGM) and any format
// registered with Go's image package decode in Go. Images convert to RGB
// as Pillow's convert("RGB") does.
//
// Resizing is Pillow's antialiased bilinear filter, in C with AVX2
// (chosen as package collate's kernels are, TENSORBATCH_KERNELS included)
// beside a plain Go reference that every path matches bit for bit. In the
// Exact mode (the default) it uses Pillow's own fixed-point arithmetic:
// the output equals torchvision's with its PIL backend for the same crop
// box, bit for bit where libjpeg-turbo decodes. The Fast mode, for
// training throughput, resizes in 16-bit fixed point, the vertical pass
// first, and decodes JPEGs as Pillow's draft mode does: with the fast
// IDCT, the chroma upsampled by replication, and DCT scaling where the
// crop is at least twice the output (about 45 dB PSNR against Exact at
// full scale, 35 dB or more with DCT scaling). Crops and flips are drawn
// from the slot's RNG, so batches are the same for any worker count.
//
// A worker's decoder state and buffers are reused from image to image:
// the libjpeg-turbo path allocates nothing per image. A file that is not
// an image, truncated or corrupt, or declares more pixels than MaxPixels
// fails with an error naming it (errors.Is ErrNotImage, ErrCorrupt,
// ErrTooManyPixels), which the loader delivers as the sample's
// *engine.SampleError.
//
// A file's validity does not depend on the crop: although libjpeg-turbo
// decodes only the rows a crop needs, every JPEG is first walked whole
// (its marker segments, each scan's data, the EOI marker; a small part
// of a decode's time: BenchmarkCheckJPEG), so a file cut short or with a
// marker damaged fails as ErrCorrupt in every epoch, in either Mode and
// with either decoder; the other formats are decoded whole. Bytes after
// EOI are ignored, as libjpeg ignores them. Damage that keeps a scan's markers intact (a
// flipped bit) is found only where a decoder reaches it, or not at all.
//
// Only regular files are read: a directory, FIFO, device or socket (or a
// link to one) fails with ErrNotRegular before any byte is read, and a
// FIFO does not block. A file larger than MaxFileBytes
// (DefaultMaxFileBytes, 64 MiB) fails with ErrFileTooLarge naming the
// limit, before it is read, or as soon as it grows past it. A path with
// a NUL byte is an error (fs.ErrInvalid), not the file before the NUL.
//
// ImageFolder numbers classes and orders files as torchvision does for
// any name: Python's sorted() on os.fsdecode'd names, which is code point
// order with each byte that is not UTF-8 read as U+DC80-U+DCFF, not
// byte order.
//
// A Dataset's Fingerprint (engine.Fingerprinter), which a loader's State
// records, names its transform, JPEG decoder, classes and files (names
// relative to the folder they share, labels and sizes; no image is
// read), so a job resumed on another transform, folder or list is
// refused, and one resumed on the same tree copied elsewhere is not.
package vision
