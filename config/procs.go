package config

import (
	"fmt"
	"strconv"
	"strings"
)

// Processor modes (server.procs): how many Ps the Go runtime schedules
// goroutines on (GOMAXPROCS).
const (
	// ProcsAdaptive (the default) runs the node on one P while one CPU is
	// more than it uses, and on the runtime's default (ProcsAuto) as soon
	// as it needs more: on a node that is mostly idle, goroutines woken by
	// the network then run where the poller found them, instead of waking
	// a second thread on another CPU for each (SPEC 16's one-at-a-time
	// figure; cmd/switchyard's procs tuner).
	ProcsAdaptive = "adaptive"
	// ProcsAuto is the runtime's own choice: the CPUs the process may run
	// on, or its container's CPU limit, kept up to date by the runtime.
	ProcsAuto = "auto"
)

// ParseProcs reads server.procs: "adaptive", "auto", or a number of Ps
// (at least 1), returned as n (0 for the two modes).
func ParseProcs(s string) (mode string, n int, err error) {
	switch v := strings.TrimSpace(s); v {
	case ProcsAdaptive, ProcsAuto:
		return v, 0, nil
	default:
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return "", 0, fmt.Errorf("want %q (the default), %q (the Go runtime's own choice) or a number of CPUs of at least 1, got %q", ProcsAdaptive, ProcsAuto, s)
		}
		return "", n, nil
	}
}
