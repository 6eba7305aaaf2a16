package routing

// CostBased picks the lowest expected price (input and output price at the
// request's estimated tokens); ties are broken at random (SPEC 5 `cost`). A
// deployment with no price counts as the median price of the candidates, as
// in the adaptive selector: unknown is neither free nor dearest.
type CostBased struct{}

// costTie treats prices within a millionth of each other as equal.
const costTie = 1e-6

// Select implements Selector.
func (CostBased) Select(p *Pick) int {
	price := p.Scratch(len(p.Candidates))
	p.Prices(price)
	return argminRandom(price, costTie, p.Rand)
}

var _ Selector = CostBased{}
