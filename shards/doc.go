// Package shards provides streaming sources for the engine: WebDataset tar
// shards read from local files, http(s):// and s3:// URLs (Source, an
// engine.Iterable for engine.FromIterable), and token windows of flat token
// files for language models (Tokens, a map-style engine.Dataset).
//
// Conventions: a shard is named by a URL or a local path, and a set of
// shards by a brace pattern ("train-{0000..0999}.tar", see Expand). Every
// error names the shard, and the member or sample key where there is one.
// Remote reads never hang: each request and each silence of a response
// body is bounded by Opener.Timeout, and transient failures (5xx, 429,
// timeouts, dropped connections, truncated bodies) are retried with
// backoff from the byte they stopped at, counted in Opener.Retries.
// Heavy clients (the AWS SDK for s3://) are imported here only, never by
// engine, collate or pinned. The Cache option keeps remote shards on
// local disk within a byte budget, shared by the processes of a node.
//
// Untrusted sizes bound nothing until checked against bytes that exist: a
// tar member is read into a buffer that grows as its bytes arrive (a
// header declaring a TiB costs the bytes the shard holds), a shard list's
// counts are checked against each shard's size before anything is sized
// by them and held to the data while it is read, a brace pattern's names
// are counted before any is made, and a token file cut short while mapped
// is an error naming the file and the window, not a SIGBUS.
package shards
