package main

import (
	"io"
	"log/slog"
	"math"
	"runtime/debug"
	"testing"

	"switchyard/config"
)

// TestApplyMemoryLimit: a configured size becomes the runtime's soft
// limit; GOMEMLIMIT in the environment is left as the runtime applied it.
func TestApplyMemoryLimit(t *testing.T) {
	prev := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })
	log := slog.New(slog.NewTextHandler(io.Discard, nil))

	debug.SetMemoryLimit(math.MaxInt64)
	if n := applyMemoryLimit(config.Server{MemoryLimitSpec: "256MiB"}, "", t.TempDir(), log); n != 256<<20 || debug.SetMemoryLimit(-1) != 256<<20 {
		t.Fatalf("limit %d, runtime %d", n, debug.SetMemoryLimit(-1))
	}
	debug.SetMemoryLimit(300 << 20) // as GOMEMLIMIT=300MiB would have set it
	if n := applyMemoryLimit(config.Server{MemoryLimitSpec: "256MiB"}, "300MiB", t.TempDir(), log); n != 300<<20 || debug.SetMemoryLimit(-1) != 300<<20 {
		t.Fatalf("GOMEMLIMIT overridden: %d", debug.SetMemoryLimit(-1))
	}
	debug.SetMemoryLimit(math.MaxInt64)
	if n := applyMemoryLimit(config.Server{MemoryLimitSpec: "auto"}, "", t.TempDir(), log); n != 0 || debug.SetMemoryLimit(-1) != math.MaxInt64 {
		t.Fatalf("auto without a cgroup limit set %d", n)
	}
}

// TestApplyGCPercent: server.gc_percent becomes the collector's GOGC;
// GOGC in the environment is left as the runtime applied it.
func TestApplyGCPercent(t *testing.T) {
	prev := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(prev) })
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if g := applyGCPercent(config.Server{GCPercent: 70}, "", log); g != 70 || debug.SetGCPercent(70) != 70 {
		t.Fatalf("gc percent %d", g)
	}
	debug.SetGCPercent(150) // as GOGC=150 would have set it
	if g := applyGCPercent(config.Server{GCPercent: 70}, "150", log); g != 150 || debug.SetGCPercent(150) != 150 {
		t.Fatalf("GOGC overridden: %d", g)
	}
}
