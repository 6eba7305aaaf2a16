package main

// The node's Ps (server.procs). Measured on a 2-CPU VM (bench/c=1 runs of
// 2026-12-06): one request at a time, a node at the runtime's default of
// two Ps spends about 60 µs more per request than the same node on one P,
// and 25% more CPU, because every goroutine the network wakes also wakes
// a second, idle thread on the other CPU to look for work, which finds
// none. Under load that thread has work and the second P pays for itself.
// "adaptive" therefore runs the node on one P while it uses well under
// one CPU, and gives it back the runtime's default at once when one P is
// not enough.

import (
	"context"
	"log/slog"
	"math"
	"runtime"
	"runtime/metrics"
	"time"

	"switchyard/config"
)

// The adaptive policy's thresholds, in CPUs the process used per tick
// (user and system time over wall time, what top shows).
const (
	procsTick = 100 * time.Millisecond
	// procsQuiet: a tick under it could have run on one P with room to
	// spare; procsCalm of them in a row (2 s) move the node to one P
	procsQuiet = 0.6
	procsCalm  = 20
	// procsBusy: at one P, a tick over it means the P is nearly always
	// taken; so does runnable goroutines' mean wait for it over
	// procsWaitUp: either moves the node back to every P at once
	procsBusy   = 0.85
	procsWaitUp = 50 * time.Microsecond
)

// procsPolicy decides tick by tick between one P and the runtime's
// default.
type procsPolicy struct {
	one   bool // the node runs on one P
	quiet int  // quiet ticks in a row, at the default
}

// step takes the CPUs the node used over the last tick and the mean time
// runnable goroutines waited for a P in it, and returns the change to
// make: -1 to one P, +1 back to the default, 0 none.
func (p *procsPolicy) step(cpus float64, wait time.Duration) int {
	if p.one {
		if cpus > procsBusy || wait > procsWaitUp {
			p.one, p.quiet = false, 0
			return +1
		}
		return 0
	}
	if cpus >= procsQuiet {
		p.quiet = 0
		return 0
	}
	if p.quiet++; p.quiet < procsCalm {
		return 0
	}
	p.one = true
	return -1
}

// startProcs applies server.procs unless GOMAXPROCS (env) is set (the
// runtime has applied that one, and an operator who sets it means it):
// a number is set once, "auto" leaves the runtime's choice, and
// "adaptive" starts the tuner until ctx ends, where the runtime's default
// is more than one P and the process's CPU time can be read. It reports
// whether the tuner runs.
func startProcs(ctx context.Context, s config.Server, env string, log *slog.Logger) bool {
	if env != "" {
		log.Info("Ps from GOMAXPROCS; server.procs is not applied", "GOMAXPROCS", env, "server.procs", s.Procs)
		return false
	}
	mode, n, err := config.ParseProcs(s.Procs)
	switch {
	case err != nil || mode == config.ProcsAuto:
		return false // config.Load has refused a bad value
	case n > 0:
		runtime.GOMAXPROCS(n)
		log.Info("Ps set", "server.procs", n)
		return false
	}
	if runtime.GOMAXPROCS(0) <= 1 {
		return false // nothing to adapt
	}
	if _, ok := processCPU(); !ok {
		log.Info("server.procs adaptive: the process's CPU time cannot be read here; running on the runtime's default", "procs", runtime.GOMAXPROCS(0))
		return false
	}
	log.Info("Ps adaptive: one while the node is mostly idle, the runtime's default under load (go_sched_gomaxprocs_threads shows which)",
		"default", runtime.GOMAXPROCS(0))
	t := time.NewTicker(procsTick)
	go func() {
		defer t.Stop()
		w, one := newWaitMeter(), false
		tuneProcs(ctx, t.C, time.Now, processCPU, w.mean, func(o bool) {
			if one = o; one {
				runtime.GOMAXPROCS(1)
			} else {
				runtime.SetDefaultGOMAXPROCS()
			}
			log.Debug("Ps changed", "procs", runtime.GOMAXPROCS(0))
		})
		if one {
			runtime.SetDefaultGOMAXPROCS() // the node is gone; what else runs in the process gets its Ps back
		}
	}()
	return true
}

// tuneProcs runs the adaptive policy on every tick until ctx ends: the
// CPUs used since the last tick (cpu's process time over now's wall time)
// and wait's mean wait for a P; set(true) moves the node to one P,
// set(false) back to the runtime's default.
func tuneProcs(ctx context.Context, ticks <-chan time.Time, now func() time.Time, cpu func() (time.Duration, bool), wait func() time.Duration, set func(one bool)) {
	var p procsPolicy
	lastWall := now()
	lastCPU, _ := cpu()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticks:
		}
		wall := now()
		c, ok := cpu()
		if !ok {
			continue // no reading is no evidence the node is idle: the next one spans this tick too
		}
		used, elapsed := c-lastCPU, wall.Sub(lastWall)
		lastWall, lastCPU = wall, c
		if elapsed <= 0 {
			continue
		}
		switch p.step(float64(used)/float64(elapsed), wait()) {
		case -1:
			set(true)
		case +1:
			set(false)
		}
	}
}

// waitMeter reads the runtime's histogram of how long runnable goroutines
// waited for a P (/sched/latencies:seconds) and gives the mean of what it
// recorded since the last read.
type waitMeter struct {
	s    []metrics.Sample
	prev []uint64
}

func newWaitMeter() *waitMeter {
	return &waitMeter{s: []metrics.Sample{{Name: "/sched/latencies:seconds"}}}
}

// mean is the mean wait recorded since the last call (0 when none).
func (m *waitMeter) mean() time.Duration {
	metrics.Read(m.s)
	if m.s[0].Value.Kind() != metrics.KindFloat64Histogram {
		return 0
	}
	h := m.s[0].Value.Float64Histogram()
	d := histMean(h, m.prev)
	m.prev = append(m.prev[:0], h.Counts...)
	return d
}

// histMean is the mean of what h counted past prev (a previous read of
// its counts; nil: none), each count at its bucket's middle (an infinite
// bound: the finite one).
func histMean(h *metrics.Float64Histogram, prev []uint64) time.Duration {
	var n, sum float64
	for i, c := range h.Counts {
		if i < len(prev) {
			c -= prev[i]
		}
		if c == 0 {
			continue
		}
		lo, hi := h.Buckets[i], h.Buckets[i+1]
		mid := (lo + hi) / 2
		switch {
		case math.IsInf(lo, -1):
			mid = hi
		case math.IsInf(hi, 1):
			mid = lo
		}
		n += float64(c)
		sum += float64(c) * mid
	}
	if n == 0 {
		return 0
	}
	return time.Duration(sum / n * float64(time.Second))
}
