package routing

import (
	"switchyard/config"
)

// Reconfigure returns a router with new routing knobs (a config reload,
// SPEC 11) that keeps this one's live state: every deployment's state
// (in-flight, latency estimate, cooldown, streak) by id, the warm-cache
// memory, round robin's turns, the timeline and the plan counter
// (CONVENTIONS 3: config and live state are different types). The old
// router stays valid for the plans already running on it; both see the
// same deployment states, so their outcomes land in one place. Deployment
// states are shared as they are at the call: the caller publishes the new
// router right away.
func (r *Router) Reconfigure(cfg config.Routing) *Router {
	n := NewRouter(cfg, r.clock, int64(r.seed), r.obs, r.usage)
	n.epoch = r.epoch // ticks stored in the states stay meaningful
	n.warm = r.warm
	n.plans.Store(r.plans.Load())
	// round robin's turns are live state too: a fresh table would send the
	// next request of every candidate set to its first candidate
	n.selectors["round_robin"] = r.selectors["round_robin"]
	r.states.Range(func(k, v any) bool {
		n.states.Store(k, v)
		return true
	})
	return n
}
