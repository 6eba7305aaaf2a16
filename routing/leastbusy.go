package routing

// LeastBusy picks the candidate with the fewest in-flight attempts on this
// node; ties are broken at random (SPEC 5 `least_busy`).
type LeastBusy struct{}

// Select implements Selector.
func (LeastBusy) Select(p *Pick) int {
	busy := p.Scratch(len(p.Candidates))
	for i, c := range p.Candidates {
		busy[i] = float64(c.State.inflight.Load())
	}
	return argminRandom(busy, 0, p.Rand)
}

var _ Selector = LeastBusy{}
