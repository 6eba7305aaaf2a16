package routing

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// DeploymentState is one deployment's live state on this node (SPEC 6): its
// in-flight count, peak-EWMA latency estimate, cooldown, failure streak,
// probe slot and recent outcome counts. It is keyed by deployment id and
// outlives catalog swaps: the catalog.Deployment (configuration) is replaced
// on reload, this is not (CONVENTIONS 3).
//
// Timestamps are nanoseconds on the router's monotonic timeline (see
// Router.tick); 0 means "never". A cooldown is a timestamp and a multiplier
// evaluated lazily (CONVENTIONS 7): no timer or goroutine exists per failure.
type DeploymentState struct {
	// Immutable after construction.
	id  string
	key uint64 // idKey(id): what round robin keys candidate sets by

	// Lock-free: read on the selection path without mu. inflight is
	// written with atomic adds; estimate, coolSince, coolUntil and
	// probeFrom only while holding mu; probing by compare-and-swap, and
	// lastProbe only by the goroutine that holds the probe slot.
	inflight  atomic.Int64
	awaiting  atomic.Int64 // the sync attempts among inflight: their completion is their latency sample
	estimate  latencyEstimate
	coolSince atomic.Int64 // start of the current (or last) cooldown
	coolUntil atomic.Int64 // end of the current (or last) cooldown; cooling while now < coolUntil
	probeFrom atomic.Int64 // no probe before this tick: the upstream's Retry-After; 0 = none
	lastProbe atomic.Int64 // start of the last recovery probe
	probing   atomic.Bool  // a probe is in flight (the one probe slot is taken)
	// quietSince is the last tick at which the deployment showed progress
	// on its sync attempts: it went from none awaited to one, or one
	// completed.
	quietSince atomic.Int64

	mu sync.Mutex
	// Guarded by mu.
	streak  int           // consecutive 5xx/timeout/network failures since the last success
	mult    uint          // cooldown exponent: the next backoff cooldown is base << mult
	trigger string        // what started the current (or last) cooldown
	recent  outcomeWindow // outcome counts of the current and the previous minute
}

// healthRules are the SPEC 6 knobs in ticks, derived once from config.Routing.
type healthRules struct {
	base, max  int64   // cooldown_base, cooldown_max
	threshold  int     // failures_before_cooldown
	probeEvery int64   // probe_interval; 0 = a fifth of the current cooldown
	decay      float64 // ewma_decay in ns
}

// ID returns the deployment id the state belongs to.
func (s *DeploymentState) ID() string { return s.id }

// InFlight returns the attempts running on the deployment on this node.
func (s *DeploymentState) InFlight() int64 { return s.inflight.Load() }

// LatencyEstimate returns the peak-EWMA latency estimate as its samples
// left it, 0 before the first sample. Selectors read it through
// Pick.Latencies, which substitutes a prior for a deployment without
// samples and ages one without recent samples toward the pool's median.
func (s *DeploymentState) LatencyEstimate() time.Duration {
	return time.Duration(s.estimate.raw())
}

// pendingAge is how long a deployment with sync attempts in flight has
// gone without completing one (0 when none is in flight). Selectors treat
// it as a lower bound on the latency: a deployment that turned slow shows
// it while its first slow answers are still outstanding, instead of only
// once they complete, so a brownout stops attracting traffic within about
// one old latency rather than one new latency.
//
// Streams do not count: a stream's latency sample is its time to first
// byte, but its attempt completes only when the stream ends, so a stream
// that answered at once and is still relaying tokens says nothing about how
// slow the deployment is. Counted, they made the deployment with the most
// streams (the one completing most often) look the fastest, and the
// `latency` strategy herded every stream onto it.
func (s *DeploymentState) pendingAge(now int64) time.Duration {
	if s.awaiting.Load() <= 0 {
		return 0
	}
	return time.Duration(max(0, now-s.quietSince.Load()))
}

// coolingAt reports whether the deployment is in cooldown at tick now.
func (s *DeploymentState) coolingAt(now int64) bool { return now < s.coolUntil.Load() }

// probeReady reports whether a recovery probe may start at tick now: the
// deployment is cooling, no probe is in flight, and the next probe is due
// (see nextProbe).
func (s *DeploymentState) probeReady(now int64, r *healthRules) bool {
	return !s.probing.Load() && s.probeDue(now, r)
}

func (s *DeploymentState) probeDue(now int64, r *healthRules) bool {
	return now < s.coolUntil.Load() && now >= s.nextProbe(r)
}

// nextProbe is the earliest tick of the next recovery probe of the current
// (or last) cooldown (SPEC 6): probe_interval (default a fifth of the
// cooldown) after the cooldown began or after the last probe, whichever is
// later, and never before the upstream's Retry-After has passed. A
// cooldown as long as its Retry-After is therefore never probed.
func (s *DeploymentState) nextProbe(r *healthRules) int64 {
	until, since := s.coolUntil.Load(), s.coolSince.Load()
	every := r.probeEvery
	if every == 0 {
		every = (until - since) / 5
	}
	return max(max(since, s.lastProbe.Load())+every, s.probeFrom.Load())
}

// claimProbe takes the probe slot if a probe is due; at most one caller
// holds it until releaseProbe. Only the holder writes lastProbe, so the
// re-check after the swap is exact.
func (s *DeploymentState) claimProbe(now int64, r *healthRules) bool {
	if !s.probeReady(now, r) || !s.probing.CompareAndSwap(false, true) {
		return false
	}
	if !s.probeDue(now, r) {
		s.probing.Store(false)
		return false
	}
	s.lastProbe.Store(now)
	return true
}

// releaseProbe frees the probe slot.
func (s *DeploymentState) releaseProbe() { s.probing.Store(false) }

// recordLocked applies one outcome to the health rules of SPEC 6 and
// returns the trigger of the cooldown it started, or "".
//
// An outcome of an attempt that started before the current cooldown began
// is stale: it was already in flight when the deployment was judged, so it
// neither extends, ends nor escalates the cooldown (ten requests in flight
// that all get a 429 start one cooldown, not one of 2^10 times the base).
func (s *DeploymentState) recordLocked(c Class, retryAfter time.Duration, started, now int64, r *healthRules) string {
	cooling := s.coolingAt(now)
	if cooling && started < s.coolSince.Load() {
		return ""
	}
	switch c {
	case ClassOK:
		s.streak, s.mult = 0, 0
		if cooling { // a probe (or the last resort) succeeded: recovered
			s.coolUntil.Store(now)
		}
	case ClassRateLimited:
		d := s.backoffLocked(now, r)
		if ra := int64(retryAfter); ra > d {
			d = min(ra, r.max)
		}
		return s.coolLocked(now, d, retryAfter, TriggerRateLimited)
	case ClassAuth, ClassNotFound:
		return s.coolLocked(now, r.max, retryAfter, TriggerAuth)
	case ClassServerError, ClassTimeout, ClassNetwork:
		s.streak++
		if s.streak >= r.threshold {
			// Past the threshold every further failure (a failed probe, or
			// the first request after the window) re-arms the cooldown,
			// doubled: the deployment has not proven it recovered.
			return s.coolLocked(now, s.backoffLocked(now, r), retryAfter, TriggerFailures)
		}
	}
	// ClassCanceled never reaches here; bad_request, context_window and
	// content_policy say nothing about the deployment's health.
	return ""
}

// backoffLocked returns the next doubling cooldown (base << mult, capped at
// max) and advances the multiplier. A deployment that has been out of
// cooldown for longer than cooldown_max starts again from the base, so a
// 429 an hour after the last one is not "consecutive".
func (s *DeploymentState) backoffLocked(now int64, r *healthRules) int64 {
	if until := s.coolUntil.Load(); until != 0 && now-until > r.max {
		s.mult = 0
	}
	d := r.max
	if s.mult < 62 && r.base <= r.max>>s.mult {
		d = r.base << s.mult
	}
	if d < r.max {
		s.mult++
	}
	return d
}

// coolLocked starts a cooldown of d ticks at now and returns its trigger.
// An upstream Retry-After (0 if none) holds off its probes until it has
// passed (SPEC 6), whatever the outcome's class. A cooldown re-armed while
// it runs (a last resort's failures, a probe's 429 without Retry-After)
// never ends, or lets probes in, before what was decided already: the
// upstream's earlier Retry-After still stands. A cooldown that has ended
// holds nothing: a Retry-After longer than cooldown_max cut short with it,
// so a later cooldown without one is probed on its own interval.
func (s *DeploymentState) coolLocked(now, d int64, retryAfter time.Duration, trigger string) string {
	running := s.coolingAt(now)
	s.coolSince.Store(now)
	s.coolUntil.Store(max(now+d, s.coolUntil.Load()))
	from := s.probeFrom.Load()
	if from <= now || !running {
		from = 0
	}
	if retryAfter > 0 {
		// Saturating: a Retry-After as an HTTP date in the far future
		// parses to the largest Duration, and now+ra would wrap negative
		// and let probes in at once.
		from = max(from, now+min(int64(retryAfter), math.MaxInt64-now))
	}
	s.probeFrom.Store(from)
	s.trigger = trigger
	return trigger
}

// outcomeWindow counts outcomes by class in one-minute buckets.
type outcomeWindow struct {
	minute    int64 // the bucket cur counts
	cur, prev [NumClasses]uint32
}

const tickMinute = int64(time.Minute)

func (w *outcomeWindow) rotate(now int64) {
	m := now / tickMinute
	switch {
	case m == w.minute:
		return
	case m == w.minute+1:
		w.prev = w.cur
	default:
		w.prev = [NumClasses]uint32{}
	}
	w.cur = [NumClasses]uint32{}
	w.minute = m
}

func (w *outcomeWindow) add(c Class, now int64) {
	w.rotate(now)
	if c < NumClasses {
		w.cur[c]++
	}
}

// DeploymentHealth is one deployment's state for GET /admin/health (SPEC 6).
type DeploymentHealth struct {
	ID              string           `json:"id"`
	Cooling         bool             `json:"cooling"`
	CooldownUntil   time.Time        `json:"cooldown_until,omitzero"` // end of the current cooldown
	CooldownTrigger string           `json:"cooldown_trigger,omitempty"`
	Streak          int              `json:"streak"`                   // consecutive failures since the last success
	LatencySeconds  float64          `json:"latency_estimate_seconds"` // 0 before the first sample
	InFlight        int64            `json:"in_flight"`
	Probing         bool             `json:"probing"`             // a recovery probe is in flight
	NextProbe       time.Time        `json:"next_probe,omitzero"` // earliest next probe while cooling
	Recent          map[string]int64 `json:"recent_outcomes"`     // by class, current and previous minute
}

// snapshot reads the state for the admin API.
func (s *DeploymentState) snapshot(now int64, r *healthRules, at func(int64) time.Time) DeploymentHealth {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := DeploymentHealth{
		ID:             s.id,
		Streak:         s.streak,
		LatencySeconds: s.LatencyEstimate().Seconds(),
		InFlight:       s.inflight.Load(),
		Probing:        s.probing.Load(),
		Recent:         map[string]int64{},
	}
	if s.coolingAt(now) {
		until := s.coolUntil.Load()
		h.Cooling, h.CooldownUntil, h.CooldownTrigger = true, at(until), s.trigger
		if next := s.nextProbe(r); next < until {
			h.NextProbe = at(max(next, now))
		}
	}
	s.recent.rotate(now)
	for c := Class(0); c < NumClasses; c++ {
		if n := int64(s.recent.cur[c]) + int64(s.recent.prev[c]); n > 0 {
			h.Recent[c.String()] = n
		}
	}
	return h
}
