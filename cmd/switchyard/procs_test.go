package main

import (
	"context"
	"io"
	"log/slog"
	"math"
	"runtime"
	"runtime/metrics"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"switchyard/config"
)

// TestProcsPolicy: procsCalm quiet ticks in a row move the node to one P
// (a busy tick starts the count again); at one P a busy tick or a long
// wait for the P moves it back at once; a load between the two thresholds
// leaves it where it is.
func TestProcsPolicy(t *testing.T) {
	type tick struct {
		cpus float64
		wait time.Duration
	}
	quiet := func(n int) []tick { return slices.Repeat([]tick{{cpus: 0.2}}, n) }
	for _, tc := range []struct {
		name  string
		ticks []tick
		want  []int // the steps that are not 0, in order
		one   bool  // where it ends
	}{
		{"idle goes to one P after procsCalm ticks", quiet(procsCalm), []int{-1}, true},
		{"one tick short stays", quiet(procsCalm - 1), nil, false},
		{"a busy tick starts the count again", append(append(quiet(procsCalm-1), tick{cpus: 0.7}), quiet(procsCalm-1)...), nil, false},
		{"busy at one P goes back", append(quiet(procsCalm), tick{cpus: 0.9}), []int{-1, +1}, false},
		{"waiting for the P goes back", append(quiet(procsCalm), tick{cpus: 0.3, wait: 80 * time.Microsecond}), []int{-1, +1}, false},
		{"between the thresholds at one P stays", append(quiet(procsCalm), tick{cpus: 0.8, wait: 20 * time.Microsecond}, tick{cpus: 0.7}), []int{-1}, true},
		{"between the thresholds at the default stays", slices.Repeat([]tick{{cpus: 0.7}}, 3*procsCalm), nil, false},
		{"back and forth", append(append(quiet(procsCalm), tick{cpus: 2}), quiet(procsCalm)...), []int{-1, +1, -1}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var p procsPolicy
			var got []int
			for _, k := range tc.ticks {
				if s := p.step(k.cpus, k.wait); s != 0 {
					got = append(got, s)
				}
			}
			if !slices.Equal(got, tc.want) || p.one != tc.one {
				t.Fatalf("steps %v, at one P %v; want %v, %v", got, p.one, tc.want, tc.one)
			}
		})
	}
}

// TestTuneProcs: the tuner turns process CPU time over wall time into CPUs
// used per tick (here 0.2 of a CPU, then 1.5), sets one P after procsCalm
// quiet ticks and the default on the first busy one, and stops with its
// context.
func TestTuneProcs(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	ticks := make(chan time.Time)
	var wall, cpu atomic.Int64 // ns
	wall.Store(time.Unix(1_800_000_000, 0).UnixNano())
	started, stepped := make(chan struct{}), make(chan struct{})
	var once sync.Once
	var sets []bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		tuneProcs(ctx, ticks,
			func() time.Time { return time.Unix(0, wall.Load()) },
			func() (time.Duration, bool) {
				once.Do(func() { close(started) })
				return time.Duration(cpu.Load()), true
			},
			func() time.Duration { stepped <- struct{}{}; return 0 },
			func(one bool) { sets = append(sets, one) })
	}()
	<-started
	perTick := 20 * time.Millisecond // of procsTick: 0.2 CPUs
	advance := func() {
		wall.Add(int64(procsTick))
		cpu.Add(int64(perTick))
		ticks <- time.Unix(0, wall.Load())
		<-stepped
	}
	for range procsCalm {
		advance()
	}
	perTick = 150 * time.Millisecond
	advance()
	advance()
	cancel()
	<-done
	if !slices.Equal(sets, []bool{true, false}) {
		t.Fatalf("sets %v, want [true false]", sets)
	}
}

// TestHistMean: the mean of what a histogram counted since the last read,
// each count at its bucket's middle, an open bucket at its finite bound.
func TestHistMean(t *testing.T) {
	h := &metrics.Float64Histogram{
		Buckets: []float64{math.Inf(-1), 0, 10e-6, 30e-6, math.Inf(1)},
		Counts:  []uint64{0, 4, 2, 1},
	}
	// 4 at 5 µs, 2 at 20 µs, 1 at 30 µs: 90/7 µs
	if got, want := histMean(h, nil), time.Duration(90000/7); got < want-time.Nanosecond || got > want+time.Nanosecond {
		t.Fatalf("mean %v, want %v", got, want)
	}
	if got := histMean(h, []uint64{0, 4, 2, 0}); got != 30*time.Microsecond {
		t.Fatalf("mean since a read %v, want 30µs", got)
	}
	if got := histMean(h, h.Counts); got != 0 {
		t.Fatalf("nothing new: %v", got)
	}
}

// TestStartProcs: GOMAXPROCS in the environment wins; a number is set
// once; auto leaves the runtime's choice; adaptive starts the tuner where
// there is more than one P, and the tuner gives the default back when it
// stops.
func TestStartProcs(t *testing.T) {
	t.Cleanup(runtime.SetDefaultGOMAXPROCS)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx := context.Background()
	def := runtime.GOMAXPROCS(0)
	if startProcs(ctx, config.Server{Procs: "1"}, "3", log) || runtime.GOMAXPROCS(0) != def {
		t.Fatalf("GOMAXPROCS in the environment overridden: %d", runtime.GOMAXPROCS(0))
	}
	if startProcs(ctx, config.Server{Procs: "1"}, "", log) || runtime.GOMAXPROCS(0) != 1 {
		t.Fatalf("procs 1: %d", runtime.GOMAXPROCS(0))
	}
	runtime.SetDefaultGOMAXPROCS()
	if startProcs(ctx, config.Server{Procs: config.ProcsAuto}, "", log) || runtime.GOMAXPROCS(0) != def {
		t.Fatalf("auto: %d", runtime.GOMAXPROCS(0))
	}
	if def > 1 {
		ctx, cancel := context.WithCancel(ctx)
		if !startProcs(ctx, config.Server{Procs: config.ProcsAdaptive}, "", log) {
			t.Fatal("adaptive did not start its tuner")
		}
		cancel()
	}
}

// TestTuneProcsWithoutReadings: ticks whose CPU time cannot be read
// decide nothing (they used to count as idle, and moved a node to one P).
func TestTuneProcsWithoutReadings(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	ticks := make(chan time.Time)
	var wall atomic.Int64
	var sets atomic.Int32
	done := make(chan struct{})
	go func() {
		defer close(done)
		tuneProcs(ctx, ticks, func() time.Time { return time.Unix(0, wall.Load()) },
			func() (time.Duration, bool) { return 0, false },
			func() time.Duration { return 0 }, func(bool) { sets.Add(1) })
	}()
	for range 2 * procsCalm {
		ticks <- time.Unix(0, wall.Add(int64(procsTick)))
	}
	cancel()
	<-done
	if n := sets.Load(); n != 0 {
		t.Fatalf("%d changes without a CPU reading", n)
	}
}
