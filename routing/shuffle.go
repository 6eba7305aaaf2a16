package routing

// SimpleShuffle picks at random, proportional to each deployment's weight
// (default 1) (SPEC 5 `simple_shuffle`).
type SimpleShuffle struct{}

// Select implements Selector.
func (SimpleShuffle) Select(p *Pick) int {
	w := p.Scratch(len(p.Candidates))
	total := 0.0
	for i, c := range p.Candidates {
		w[i] = weightOf(c.Deployment)
		total += w[i]
	}
	return drawWeighted(w, total, p.Rand)
}

var _ Selector = SimpleShuffle{}
