package main

import (
	"context"
	"io"
	"log/slog"
	"math"
	"runtime"
	"runtime/debug"
	"slices"
	"testing"
	"time"

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

// TestGCPercentFor: the percentage server.gc_percent gives, raised for a
// small live heap so it has gcHeadroom of room, never past 1000.
func TestGCPercentFor(t *testing.T) {
	for _, tc := range []struct {
		live uint64
		base int
		want int
	}{
		{0, 70, 100}, {0, 150, 150},
		{200 << 20, 70, 70}, {60 << 20, 70, 70}, {40 << 20, 70, 80}, {16 << 20, 70, 200},
		{1 << 20, 70, 1000}, {60 << 20, 300, 300},
	} {
		if got := gcPercentFor(tc.live, tc.base); got != tc.want {
			t.Errorf("live %d MiB, base %d: %d, want %d", tc.live>>20, tc.base, got, tc.want)
		}
	}
}

// TestTuneGC: the tuner sets the percentage at once, follows the live heap
// after each collection, skips changes under a tenth, and stops with its
// context.
func TestTuneGC(t *testing.T) {
	lives := []uint64{0, 16 << 20, 17 << 20, 100 << 20, 100 << 20}
	cycles := make(chan struct{})
	var set []int
	i := 0
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tuneGC(ctx, 70, cycles, func() uint64 { v := lives[min(i, len(lives)-1)]; i++; return v }, func(p int) { set = append(set, p) })
	}()
	for range len(lives) - 1 {
		cycles <- struct{}{}
	}
	cancel()
	<-done
	// 0 -> 100 (nothing measured), 16 MiB -> 200, 17 MiB -> 188 (under a
	// tenth of 200: kept), 100 MiB -> 70, then unchanged
	if want := []int{100, 200, 70}; !slices.Equal(set, want) {
		t.Fatalf("set %v, want %v", set, want)
	}
}

// TestStartGCTunerLeavesGOGC: with GOGC in the environment the tuner does
// not run.
func TestStartGCTunerLeavesGOGC(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if startGCTuner(context.Background(), config.Server{GCPercent: 70}, "150", log) {
		t.Fatal("tuner started although GOGC is set")
	}
}

// TestLowerGCForStart: the start runs the collector at startGCPercent
// unless GOGC is set.
func TestLowerGCForStart(t *testing.T) {
	prev := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(prev) })
	lowerGCForStart("")
	if g := debug.SetGCPercent(100); g != startGCPercent {
		t.Fatalf("gc percent %d at start, want %d", g, startGCPercent)
	}
	lowerGCForStart("150")
	if g := debug.SetGCPercent(100); g != 100 {
		t.Fatalf("GOGC set, yet the start changed the collector to %d", g)
	}
}

// TestGCCycles: every collection signals the channel (the tuner's cue),
// once per collection at most one waiting, until the context ends.
func TestGCCycles(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cycles := gcCycles(ctx)
	for i := range 3 {
		runtime.GC() // the sentinel is unreachable: its finalizer runs after this
		select {
		case <-cycles:
		case <-time.After(10 * time.Second): // a bound on a failing run, not a wait for timing
			t.Fatalf("no signal after collection %d", i+1)
		}
	}
}
