// Package promstats provides a Prometheus collector for a tensorbatch
// Loader's Stats, so that a training job's data loading shows up next to
// its other metrics.
//
// Conventions: every metric is named tensorbatch_<what>, carries the
// constant label loader=<name> and the caller's labels, and is read from
// one Stats snapshot per scrape; the collector keeps no state of its own.
// Durations are in seconds and sizes in bytes, as Prometheus prefers. It
// lives in its own module, so tensorbatch's core never depends on the
// Prometheus client; expvar (Loader.Expvar) needs nothing beyond the
// standard library.
package promstats
