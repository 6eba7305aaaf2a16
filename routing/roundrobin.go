package routing

import (
	"sync"
	"sync/atomic"
)

// RoundRobin picks the next candidate in turn, with one counter per public
// model on this node (SPEC 5 `round_robin`). The counter advances once per
// multi-candidate selection, so retries within a request move on too.
type RoundRobin struct {
	turns sync.Map // public model name -> *atomic.Uint64
}

// Select implements Selector.
func (r *RoundRobin) Select(p *Pick) int {
	name := ""
	if p.Model != nil {
		name = p.Model.Name
	}
	v, ok := r.turns.Load(name)
	if !ok {
		v, _ = r.turns.LoadOrStore(name, new(atomic.Uint64))
	}
	n := v.(*atomic.Uint64).Add(1) - 1
	return int(n % uint64(len(p.Candidates)))
}

var _ Selector = (*RoundRobin)(nil)
