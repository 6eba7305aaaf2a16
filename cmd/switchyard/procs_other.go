//go:build !unix

package main

import "time"

// processCPU cannot read the process's CPU time here: server.procs
// adaptive keeps the runtime's default.
func processCPU() (time.Duration, bool) { return 0, false }
