package routing

import (
	"math/rand/v2"
	"slices"
	"time"

	"switchyard/catalog"
	"switchyard/config"
)

// Selector is one selection strategy of SPEC 5. Select returns the index of
// the chosen candidate in p.Candidates. The candidates it sees are already
// eligible for this attempt (enabled, compatible with the profile, not tried
// in this pass, not cooling down, under quota): a Selector never re-derives
// health (CONVENTIONS 2). It is called with at least two candidates, from
// many goroutines at once, and must not retain p.
type Selector interface {
	Select(p *Pick) int
}

// Candidate is one eligible deployment: its configuration and its live state.
type Candidate struct {
	Deployment *catalog.Deployment
	State      *DeploymentState

	slot int // index in the plan's pool
}

// Pick is the input of one selection. A Plan owns one and reuses it, with its
// scratch space, for every attempt, so a selection allocates nothing.
type Pick struct {
	Model      *catalog.Model
	Candidates []Candidate
	Profile    Profile
	Now        time.Time  // when the selection happens
	Rand       *rand.Rand // the request's own random source
	// Warm is the deployment that last served the request's session within
	// warm_cache_ttl and has not been in cooldown since, "" if none.
	Warm string

	tick    int64 // Now on the router's timeline
	decay   int64 // ewma_decay in ticks; 0 = estimates never age
	scratch []float64
}

// Scratch returns n float64s of reusable space, valid until Select returns.
func (p *Pick) Scratch(n int) []float64 {
	if cap(p.scratch) < n {
		p.scratch = make([]float64, n, max(n, 3*len(p.Candidates)))
	}
	return p.scratch[:n]
}

// Latencies fills dst (len(p.Candidates)) with each candidate's latency
// estimate in seconds, as every strategy that reads estimates sees it:
//   - a deployment with no sample yet gets a prior: the median of the
//     candidates' known estimates, or one second when none is known. The
//     prior is never zero, so a new deployment is neither starved nor
//     flooded;
//   - an estimate without a sample for ewma_decay is aged toward the pool's
//     median (SPEC 6, see latencyEstimate.agedSeconds): the median of the
//     candidates' fresh estimates, or of all known ones when none is
//     fresh, so a deployment that was slow once is tried again;
//   - a deployment with sync attempts in flight that has completed none
//     for longer than its estimate counts as at least that slow
//     (DeploymentState.pendingAge; streams do not count).
func (p *Pick) Latencies(dst []float64) {
	known, stale := p.estimates(dst, false)
	prior := 1.0
	if len(known) > 0 && len(known) < len(p.Candidates) {
		prior = median(known)
	}
	target := 0.0
	if stale {
		if fresh, _ := p.estimates(dst, true); len(fresh) > 0 {
			target = median(fresh)
		} else {
			known, _ = p.estimates(dst, false)
			target = median(known)
		}
	}
	for i, c := range p.Candidates {
		est := prior
		if e := &c.State.estimate; e.raw() > 0 {
			est = e.agedSeconds(p.tick, p.decay, target)
		}
		dst[i] = max(est, c.State.pendingAge(p.tick).Seconds())
	}
}

// estimates collects into dst[:0] the candidates' known estimates in
// seconds (only the fresh ones when freshOnly) and reports whether any
// known estimate is stale.
func (p *Pick) estimates(dst []float64, freshOnly bool) (est []float64, stale bool) {
	est = dst[:0]
	for _, c := range p.Candidates {
		e := &c.State.estimate
		if e.raw() == 0 {
			continue
		}
		old := e.stale(p.tick, p.decay)
		stale = stale || old
		if !freshOnly || !old {
			est = append(est, time.Duration(e.raw()).Seconds())
		}
	}
	return est, stale
}

// Prices fills dst (len(p.Candidates)) with each candidate's expected price
// in USD at the request's estimated tokens. A deployment with no price
// counts as the median of the priced candidates (SPEC 5.1); when none is
// priced every candidate costs 1, so price decides nothing.
func (p *Pick) Prices(dst []float64) {
	in, out := max(p.Profile.PromptTokens, 1), max(p.Profile.OutputTokens, 0)
	known := dst[:0]
	for _, c := range p.Candidates {
		if c.Deployment.HasPrice() {
			known = append(known, max(c.Deployment.ExpectedCost(in, out), minPrice))
		}
	}
	if len(known) == len(p.Candidates) {
		return
	}
	stand := 1.0
	if len(known) > 0 {
		stand = median(known)
	}
	for i, c := range p.Candidates {
		dst[i] = stand
		if c.Deployment.HasPrice() {
			dst[i] = max(c.Deployment.ExpectedCost(in, out), minPrice)
		}
	}
}

// minPrice keeps a priced deployment whose price rounds to zero for this
// request (output-only price, no output) from dividing by zero.
const minPrice = 1e-12

// median sorts v and returns its median.
func median(v []float64) float64 {
	slices.Sort(v)
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}

// weightOf is a deployment's configured weight (default 1).
func weightOf(d *catalog.Deployment) float64 {
	if d.Weight > 0 {
		return d.Weight
	}
	return 1
}

// drawWeighted returns an index drawn with probability w[i]/total.
func drawWeighted(w []float64, total float64, r *rand.Rand) int {
	u := r.Float64() * total
	last := 0
	for i, x := range w {
		if x <= 0 {
			continue
		}
		if u < x {
			return i
		}
		u -= x
		last = i
	}
	return last // rounding left u a hair above the sum
}

// argminRandom returns the index of the smallest score, chosen uniformly at
// random among the scores within tol (relative) of the smallest. Scores are
// non-negative.
func argminRandom(score []float64, tol float64, r *rand.Rand) int {
	best := score[0]
	for _, s := range score[1:] {
		best = min(best, s)
	}
	limit := best + tol*best
	pick, ties := 0, 0
	for i, s := range score {
		if s <= limit {
			ties++
			if ties == 1 || r.IntN(ties) == 0 {
				pick = i
			}
		}
	}
	return pick
}

// strategies registers every strategy of SPEC 5 by its config name; adding
// one is its file, its test and one line here.
var strategies = map[string]func(cfg config.Routing, usage UsageSource) Selector{
	"simple_shuffle": func(config.Routing, UsageSource) Selector { return SimpleShuffle{} },
	"round_robin":    func(config.Routing, UsageSource) Selector { return &RoundRobin{} },
	"least_busy":     func(config.Routing, UsageSource) Selector { return LeastBusy{} },
	"latency":        func(c config.Routing, _ UsageSource) Selector { return LatencyBased{Buffer: c.LatencyBuffer} },
	"cost":           func(config.Routing, UsageSource) Selector { return CostBased{} },
	"usage":          func(_ config.Routing, u UsageSource) Selector { return &UsageBased{Source: u} },
	"adaptive":       func(c config.Routing, _ UsageSource) Selector { return NewAdaptive(c) },
}

// Strategies returns the registered strategy names (for validation and docs).
func Strategies() []string {
	names := make([]string, 0, len(strategies))
	for n := range strategies {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
