// Package cputime reads the CPU time of this process, for the figures of
// the bench harness and of tensorbatch bench.
package cputime
