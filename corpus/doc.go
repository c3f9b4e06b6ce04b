// Package corpus provides language-model corpora as engine datasets: flat
// token files (Tokens, nanoGPT's train.bin), Megatron-LM / NeMo indexed
// datasets with their GPT sampling (Megatron, and WriteMegatron to write
// one), and documents packed into fixed-length sequences with
// cu_seqlens (Pack over any Documents: a MegatronDataset, a
// DocumentSlice in memory, or shards.ParquetDocuments). Mix corpora by
// weight with engine.Blend.
//
// Conventions: a sample is a sequence of tokens, written straight from
// the memory-mapped file into its place in the batch, converted to the
// field's dtype on the way; a Megatron batch is copied with one pass of
// an assembly loop over its runs of tokens (moveSpans). Files are local
// and read only through the project's regular-files helper: a FIFO or a
// device is refused, a .idx is read within a bound, every count and
// offset read from a file is checked against the bytes that exist before
// anything is sized or indexed by it, and a file cut short while mapped
// is an error naming the file and the sequence, not a SIGBUS. The
// package imports the engine, collate and the standard library, nothing
// for storage or the clouds (TestCorpusLinksNoStorage): a program that
// reads a local corpus links no cloud SDK.
package corpus
