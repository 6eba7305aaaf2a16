package main

import (
	"log/slog"
	"runtime/debug"

	"switchyard/config"
)

// applyGCPercent sets the collector's GOGC from server.gc_percent, unless
// GOGC (env) is set: the runtime has applied that one already. It returns
// the setting in force.
func applyGCPercent(s config.Server, env string, log *slog.Logger) int {
	if env != "" {
		g := debug.SetGCPercent(-1)
		debug.SetGCPercent(g)
		log.Info("collector from GOGC", "gogc", g, "server.gc_percent", s.GCPercent)
		return g
	}
	debug.SetGCPercent(s.GCPercent)
	return s.GCPercent
}

// applyMemoryLimit sets the runtime's soft memory limit from
// server.memory_limit (cgroups mounted at root for "auto"), unless
// GOMEMLIMIT (env) is set: the runtime has applied that one already and an
// operator who sets it means it. It returns the limit in force (0: none).
func applyMemoryLimit(s config.Server, env, root string, log *slog.Logger) int64 {
	if env != "" {
		n := debug.SetMemoryLimit(-1)
		log.Info("memory limit from GOMEMLIMIT", "bytes", n, "server.memory_limit", s.MemoryLimitSpec)
		return n
	}
	n, from := s.MemoryLimit(root)
	if n <= 0 {
		return 0
	}
	debug.SetMemoryLimit(n)
	log.Info("memory limit set", "bytes", n, "from", from)
	return n
}
