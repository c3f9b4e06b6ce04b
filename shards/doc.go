// Package shards provides streaming sources for the engine: WebDataset tar
// and Parquet shards read from local files, http(s)://, s3:// (S3),
// gs:// (Google Cloud Storage) and az:// (Azure Blob Storage; azblob://
// too) URLs (Source, an engine.Iterable for engine.FromIterable), and
// token windows of flat token files for language models (Tokens, a
// map-style engine.Dataset).
//
// Conventions: a shard is named by a URL or a local path, and a set of
// shards by a brace pattern ("train-{0000..0999}.tar", see Expand) or a
// folder, a name ending in "/" ("s3://bucket/train/", see List). Every
// error names the shard, and the member or sample key where there is one.
// Remote requests never hang: each request and each silence of a
// response body is bounded by Opener.Timeout. Every request (a listing's
// pages, the size probes that check a shard list, opens and the range
// requests that resume them, shard lists and indexes, cache downloads,
// Parquet footers) goes through one retry policy (see Opener): a refused
// connection, one closed before a response, a body cut short, a 5xx, 408
// or 429 and a timeout are retried with backoff, a read from the byte it
// stopped at, up to Opener.MaxRetries times in a row, counted in
// Opener.ReadRetries; anything else fails at once. Nothing a server sends
// is followed without bound: 10 redirects at most, a listing whose next
// page token repeats one it gave before (or past 100,000 pages or
// 10,000,000 shards) is an error naming the store, bucket and prefix, and
// a body is read no further than the size its server declared.
// Credentials come from each provider's usual chain: the AWS CLI's
// variables and files (NewS3Client), Google's Application Default
// Credentials (or STORAGE_EMULATOR_HOST), Azure's
// AZURE_STORAGE_CONNECTION_STRING or AZURE_STORAGE_ACCOUNT with a key or
// DefaultAzureCredential (NewAzureClient). Heavy clients (the AWS and
// Azure SDKs) are imported here only, never by engine, collate or pinned. The Cache option keeps remote shards on
// local disk within a byte budget, shared by the processes of a node.
//
// Untrusted sizes bound nothing until checked against bytes that exist: a
// tar member is read into a buffer that grows as its bytes arrive (a
// header declaring a TiB costs the bytes the shard holds), a shard list's
// counts are checked against each shard's size before anything is sized
// by them and held to the data while it is read, a brace pattern's names
// are counted before any is made, and a token file cut short while mapped
// is an error naming the file and the window, not a SIGBUS.
//
// Only regular files are read locally: a shard, a shard list, the cache's
// files, a token file, a Megatron .idx and .bin. A FIFO, device, socket
// or directory, or a link to one (/dev/zero), is refused without
// blocking, before a byte is read, with an error naming the path and what
// it is (ErrNotRegular); a file read whole (a .meta, an .idx) is read
// within a bound (ErrFileTooLarge). A cached shard whose .meta is not a
// regular file is downloaded again.
//
// # Parquet shards
//
// A shard whose name ends in ".parquet" (before any URL query) is read as
// a Parquet file, as Hugging Face's datasets library writes them, by the
// same Source, Opener and split over ranks and workers as tar shards. Each
// row is one engine.Record:
//
//   - Key is the row's index in the file, in decimal ("0", "1", ...), or
//     the value of a top-level column named "__key__" when there is one.
//   - Fields holds each top-level column's value by column name: BINARY
//     and STRING columns as their bytes; integer columns (INT32, INT64,
//     any width, signed or not: a datasets.ClassLabel is an INT64) as
//     decimal text, so that Int(rec, "label") reads them as it reads a
//     WebDataset ".cls"; booleans as "0" or "1"; FLOAT and DOUBLE as the
//     shortest decimal text that reads back to the same value.
//   - A struct column's fields are under "column.field". A struct with a
//     "bytes" field, as datasets.Image and datasets.Audio write
//     ({bytes: binary, path: string}), also has its bytes under the
//     column's own name (Fields["image"]) and, when its "path" ends in an
//     extension, under the extension too, lowercased (Fields["jpg"] for
//     "a.JPG"; "jpeg" is also under "jpg"), unless a column has that name:
//     a decoder written for WebDataset's "jpg" or "png" members reads
//     them unchanged.
//   - A null value has no field: Field names what the record has.
//
// Lists, maps, INT96 and columns nested in lists are skipped, unless
// ParquetColumns names them, which is then an error naming the shard and
// the column; so is a column ParquetColumns names that a shard lacks.
//
// A local file is read in place, through its io.ReaderAt; a remote one
// (http(s)://, s3://, gs://, az://) is read whole into memory through the Opener, with
// its retries, up to MaxParquetBytes, as a Parquet file needs random
// access (reading remote files by range requests is yet to come). Either
// way the rows are read one row group at a time, and within it one page
// per column at a time, and each page goes back to parquet-go's buffers
// once read: field bytes are copies (the large ones into buffers that
// Source.Decode reuses after vision.Pipeline.Record decodes them). Sample counts (Source.Shards) come from the files' footers:
// for a remote shard only its last bytes are read, by a range request.
// Each row group's declared row count is held to the values its columns
// hold, and the file's to the count the shard was listed with: a
// difference is an error naming the shard.
//
// A Parquet file's footer and page headers declare counts and sizes that
// parquet-go allocates by; each is held to the bytes the file has before
// parquet-go reads it, and to these bounds: a footer of at most 16 MiB,
// whose decoding allocates at most 256 MiB; a schema of at most 10,000
// elements (groups and columns), nested at most 64 levels deep; Thrift
// nested at most 32 deep; a page within its column chunk, whose reading
// allocates at most 1 GiB (its uncompressed size and 13 bytes per value),
// no larger uncompressed than its codec can make its bytes, and of no
// more values than its row group has rows. A shard beyond them is an
// error naming it.
package shards
