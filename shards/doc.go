// Package shards provides streaming sources for the engine: WebDataset tar
// shards read from local files, http(s):// and s3:// URLs (Source, an
// engine.Stream for engine.FromStream), and token windows of flat token
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
// engine, collate or pinned.
package shards
