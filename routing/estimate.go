package routing

import (
	"math"
	"sync/atomic"
	"time"
)

// latencyEstimate is one deployment's peak-EWMA latency estimate (SPEC 5.1)
// together with the time of its last sample, so that it ages (SPEC 6): an
// estimate nobody has refreshed for ewma_decay no longer speaks for the
// deployment, and slides to the pool's median over the next ewma_decay.
// Without aging a deployment that was slow once would keep its bad
// estimate for ever under every strategy that reads estimates: they stop
// sending it traffic, so it never gets the sample that would clear it.
//
// Both fields are read lock-free on the selection path and written only by
// observeLocked, under the owning DeploymentState's mu. A reader may see a
// new value with the previous sample time (or the reverse) for an instant;
// the estimate is then aged by one sample's worth too much or too little,
// which no selection can tell apart from noise.
type latencyEstimate struct {
	ns atomic.Int64 // the estimate in ns; 0 = no sample yet
	at atomic.Int64 // tick of the last sample that set the estimate; 0 = never
}

// raw returns the estimate as its samples left it, in ns; 0 before the
// first sample.
func (e *latencyEstimate) raw() int64 { return e.ns.Load() }

// stale reports whether the estimate has had no sample for longer than
// decay ticks at now: it is then aged toward the pool's median. An
// estimate with no sample at all is not stale (selectors give it a prior).
func (e *latencyEstimate) stale(now, decay int64) bool {
	return decay > 0 && e.ns.Load() > 0 && now-e.at.Load() > decay
}

// agedSeconds returns the estimate in seconds as selectors see it at now,
// given target, the pool's median in seconds: the raw estimate while it
// has had a sample within decay; then a linear slide that reaches target
// one more decay later. A deployment therefore gets the pool's median
// estimate at most two ewma_decays after its last sample, and every
// strategy that reads estimates tries it again. The slide is linear rather
// than exponential so that it ends: an exponential approach would take
// about five time constants to bring a 10x estimate within a 10%
// latency_buffer of the best, and a recovered deployment would wait that
// long for its first request.
func (e *latencyEstimate) agedSeconds(now, decay int64, target float64) float64 {
	est := time.Duration(e.ns.Load()).Seconds()
	if !e.stale(now, decay) || target <= 0 {
		return est
	}
	slid := float64(now-e.at.Load()-decay) / float64(decay)
	if slid >= 1 {
		return target
	}
	return est + (target-est)*slid
}

// observeLocked feeds one attempt's latency sample at now and returns the
// new estimate. A success is a peak-EWMA sample (SPEC 5.1): above the
// estimate it replaces it at once; below, it pulls the estimate toward
// itself by 1-exp(-dt/decay), dt being the time since the previous sample,
// so a rarely sampled deployment moves faster per sample. A stale estimate
// (no sample for decay) no longer speaks for the deployment, and selectors
// have been seeing it slide to the pool's median: its next sample replaces
// it, so a deployment rediscovered by aging is judged on what it does now
// instead of needing several more slides to shed an old peak. A failure may
// raise the estimate but never lower it (a deployment that answers 503 in a
// millisecond is not fast and must not attract traffic for failing
// quickly), and a failure that does not raise it is no sample at all: it
// leaves the estimate's age alone, so a deployment that fails fast through
// a long outage comes back with an estimate aged toward its pool, not with
// the one it had when the outage began. Callers hold the state's mu.
func (e *latencyEstimate) observeLocked(sample time.Duration, failed bool, now int64, decay float64) time.Duration {
	est, v := e.ns.Load(), int64(sample)
	switch {
	case failed && v <= est:
		return time.Duration(est)
	case est == 0 || v >= est || now-e.at.Load() > int64(decay):
		est = v
	default:
		if dt := now - e.at.Load(); dt > 0 {
			est += int64(float64(v-est) * -math.Expm1(-float64(dt)/decay))
		}
	}
	est = max(est, 1)
	e.ns.Store(est)
	e.at.Store(now)
	return time.Duration(est)
}
