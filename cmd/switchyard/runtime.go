package main

import (
	"context"
	"log/slog"
	"runtime"
	"runtime/debug"
	"runtime/metrics"

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
// live heap changes: at once, then on every signal on cycles (a collection
// ended: gcCycles) until ctx ends. A change of less than a tenth is not
// applied (set is cheap, but a live heap moving by a few percent is no
// reason to move the pacer).
func tuneGC(ctx context.Context, base int, cycles <-chan struct{}, live func() uint64, set func(int)) {
	cur := 0
	for {
		if p := gcPercentFor(live(), base); cur == 0 || 10*abs(p-cur) >= cur {
			set(p)
			cur = p
		}
		select {
		case <-ctx.Done():
			return
		case <-cycles:
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

// startGCTuner runs tuneGC after every collection (gcCycles) for
// server.gc_percent until ctx ends, unless GOGC (env) is set: the runtime
// has applied that one and an operator who sets it means it. It reports
// whether the tuner runs.
//
// After every collection, not on a clock: the live heap the percentage is
// computed from changes only at a collection, and a tuner a second late
// let the heap overshoot. An idle node (3 MB live) ran at 965%, for
// gcHeadroom over it; when load arrived the live heap grew to 7 MB, and
// the next goal was 7 MB at 965%, 75 MB, before the tick lowered it (peak
// RSS 106 MB against a steady 84 MB for one team; the 10,000-team node's
// start under load overshot the same way).
func startGCTuner(ctx context.Context, s config.Server, env string, log *slog.Logger) bool {
	if env != "" {
		log.Info("collector from GOGC; server.gc_percent is not applied", "GOGC", env, "server.gc_percent", s.GCPercent)
		return false
	}
	cycles := gcCycles(ctx)
	go tuneGC(ctx, s.GCPercent, cycles, liveHeap, func(p int) { debug.SetGCPercent(p) })
	return true
}

// gcCycles returns a channel that receives a value after each garbage
// collection until ctx ends (at most one waits: a tuner that is still busy
// misses nothing it needs, since it reads the latest live heap). It is a
// finalizer on a sentinel that arms a new sentinel each time it runs: the
// runtime runs it once the collection that found the sentinel unreachable
// is over, in the finalizer goroutine, so it only sends without blocking.
func gcCycles(ctx context.Context) <-chan struct{} {
	ch := make(chan struct{}, 1)
	var arm func()
	arm = func() {
		s := new(gcSentinel)
		runtime.SetFinalizer(s, func(*gcSentinel) {
			if ctx.Err() != nil {
				return // stopped: no new sentinel
			}
			arm() // before the signal: the collection it cues finds the next sentinel
			select {
			case ch <- struct{}{}:
			default:
			}
		})
	}
	arm()
	return ch
}

// gcSentinel is the object gcCycles watches: 32 bytes, so it is an
// allocation of its own (a finalizer on a zero-sized object, or on one the
// runtime packs with others under 16 bytes, may never run).
type gcSentinel struct{ _ [32]byte }

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
