package routing

import (
	"math/rand/v2"

	"switchyard/config"
)

// Adaptive is the adaptive selector of SPEC 5.1: power of two choices over
// weights recomputed per request from this node's live state.
//
// Weights: the deployment's configured weight times its objective factor —
// 1/latency (objective latency), 1/expected price (cost) or both
// (balanced, the default) — then raised to at least MinWeightFraction of the
// heaviest candidate (the floor keeps a slow or recovering deployment on a
// trickle of real traffic), then multiplied by WarmCacheWeight for the
// deployment holding the session's warm prompt cache (Pick.Warm).
//
// Choice: two draws proportional to the weights; a candidate drawn twice
// wins outright, otherwise the one with the lower instantaneous load
// (latency estimate × (in-flight + 1)) wins. Loads within TieMargin
// (latency_buffer, relative) of each other are a tie, won by the first draw:
// two deployments a hair apart would otherwise split contested duels
// all-or-nothing on estimate noise. The
// draws are independent (with replacement) rather than distinct: with
// distinct draws a two-deployment pool would always duel the same pair and
// the weights — objective, floor and warm bonus — would decide nothing. With
// equal loads the shares equal the weights exactly.
type Adaptive struct {
	MinWeightFraction float64 // routing.min_weight_fraction
	WarmCacheWeight   float64 // routing.warm_cache_weight
	TieMargin         float64 // routing.latency_buffer
}

// NewAdaptive returns the adaptive selector configured by cfg.
func NewAdaptive(cfg config.Routing) *Adaptive {
	return &Adaptive{MinWeightFraction: cfg.MinWeightFraction, WarmCacheWeight: max(cfg.WarmCacheWeight, 1), TieMargin: cfg.LatencyBuffer}
}

// The objectives of SPEC 5.1.
const (
	objBalanced = iota
	objLatency
	objCost
)

func objectiveOf(p *Pick) int {
	if p.Model != nil {
		switch p.Model.Objective {
		case "latency":
			return objLatency
		case "cost":
			return objCost
		}
	}
	return objBalanced
}

// Select implements Selector.
func (a *Adaptive) Select(p *Pick) int {
	n := len(p.Candidates)
	if n == 1 {
		return 0
	}
	buf := p.Scratch(2 * n)
	lat, w := buf[:n], buf[n:]
	a.Weights(p, lat, w)
	total := 0.0
	for _, x := range w {
		total += x
	}
	return a.duel(p, lat, w, total, p.Rand)
}

// Weights fills lat with the candidates' latency estimates (seconds) and w
// with their adaptive weights for this request.
func (a *Adaptive) Weights(p *Pick, lat, w []float64) {
	p.Latencies(lat)
	obj := objectiveOf(p)
	if obj != objLatency {
		p.Prices(w)
	}
	heaviest := 0.0
	for i, c := range p.Candidates {
		base := weightOf(c.Deployment)
		switch obj {
		case objLatency:
			w[i] = base / lat[i]
		case objCost:
			w[i] = base / w[i]
		default:
			w[i] = base / (w[i] * lat[i])
		}
		heaviest = max(heaviest, w[i])
	}
	floor := heaviest * a.MinWeightFraction
	for i, c := range p.Candidates {
		w[i] = max(w[i], floor)
		if p.Warm != "" && c.Deployment.ID == p.Warm {
			w[i] *= a.WarmCacheWeight
		}
	}
}

func (a *Adaptive) duel(p *Pick, lat, w []float64, total float64, r *rand.Rand) int {
	i := drawWeighted(w, total, r)
	j := drawWeighted(w, total, r)
	if i == j {
		return i
	}
	li := lat[i] * float64(p.Candidates[i].State.inflight.Load()+1)
	lj := lat[j] * float64(p.Candidates[j].State.inflight.Load()+1)
	if lj < li/(1+a.TieMargin) {
		return j
	}
	return i
}

var _ Selector = (*Adaptive)(nil)
