//go:build !unix

package main

import "time"

// processCPU is 0 where getrusage is not: the rows then give no CPU
// ratio.
func processCPU() time.Duration { return 0 }
