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
// Remote reads never hang: each request and each silence of a response
// body is bounded by Opener.Timeout, and transient failures (5xx, 429,
// timeouts, dropped connections, truncated bodies) are retried with
// backoff from the byte they stopped at, counted in Opener.ReadRetries.
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
package shards
