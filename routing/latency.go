package routing

// LatencyBased picks the lowest latency estimate (time to first byte for
// streams), at random among the candidates within Buffer (relative, default
// 0.10) of the best so traffic does not herd (SPEC 5 `latency`).
type LatencyBased struct {
	Buffer float64 // routing.latency_buffer
}

// Select implements Selector.
func (l LatencyBased) Select(p *Pick) int {
	lat := p.Scratch(len(p.Candidates))
	p.Latencies(lat)
	return argminRandom(lat, l.Buffer, p.Rand)
}

var _ Selector = LatencyBased{}
