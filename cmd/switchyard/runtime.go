package main

import (
	"context"
	"log/slog"
	"runtime/debug"
	"runtime/metrics"
	"time"

	"switchyard/config"
)

// gcHeadroom is the least the heap may grow past what is live before the
// collector runs, whatever server.gc_percent gives. A node's heap is mostly
// long-lived state, so a low percentage keeps a large node's RSS near what
// it holds (SPEC 16); but a small heap (one team: about 15 MB live) run at
// 70% collected 14 times a second under load and cost about 10% more CPU a
// request than Go's default. With this much room it collects less often
// than at Go's default, for no more memory than that.
const gcHeadroom = 32 << 20

// gcPercentFor is the collector's GOGC for a live heap of live bytes: base
// (server.gc_percent), or more when base percent of live is less than
// gcHeadroom; never past 1000.
func gcPercentFor(live uint64, base int) int {
	p := base
	if live > 0 {
		p = max(p, int(min(uint64(gcHeadroom)*100/live, 1000)))
	} else {
		p = max(p, 100) // nothing measured yet: Go's default
	}
	return min(p, 1000)
}

// liveHeap is the heap the last collection found live.
func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// tuneGC keeps the collector's GOGC at gcPercentFor(live(), base) as the
// live heap changes: at once, then on every tick until ctx ends. A change
// of less than a tenth is not applied (set is cheap, but a live heap
// moving by a few percent is no reason to move the pacer).
func tuneGC(ctx context.Context, base int, ticks <-chan time.Time, live func() uint64, set func(int)) {
	cur := 0
	for {
		if p := gcPercentFor(live(), base); cur == 0 || 10*abs(p-cur) >= cur {
			set(p)
			cur = p
		}
		select {
		case <-ctx.Done():
			return
		case <-ticks:
		}
	}
}

func abs(x int) int { return max(x, -x) }

// startGCPercent is the collector's GOGC while the node starts: reading a
// config file of 100,000 keys builds a transient tree of about 200 MB
// live (the YAML parser's document, the decoded map, the catalog built
// from it), and at Go's 100 the heap grew to twice that. startGCTuner sets
// the running value once the node is assembled.
const startGCPercent = 25

// lowerGCForStart sets startGCPercent unless GOGC (env) is set.
func lowerGCForStart(env string) {
	if env == "" {
		debug.SetGCPercent(startGCPercent)
	}
}

// startGCTuner runs tuneGC every second for server.gc_percent until ctx
// ends, unless GOGC (env) is set: the runtime has applied that one and an
// operator who sets it means it. It reports whether the tuner runs.
func startGCTuner(ctx context.Context, s config.Server, env string, log *slog.Logger) bool {
	if env != "" {
		log.Info("collector from GOGC; server.gc_percent is not applied", "GOGC", env, "server.gc_percent", s.GCPercent)
		return false
	}
	t := time.NewTicker(time.Second)
	go func() {
		defer t.Stop()
		tuneGC(ctx, s.GCPercent, t.C, liveHeap, func(p int) { debug.SetGCPercent(p) })
	}()
	return true
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
