package routing

// UsageBased picks the deployment that has used the smallest share of its
// own quota this minute: the larger of requests/RPM and tokens/TPM, as
// counted by Source (cluster-wide when Source is the Redis counter). A
// deployment without a quota has used none of it. Ties are broken at random
// (SPEC 5 `usage`).
type UsageBased struct {
	Source UsageSource
}

// Select implements Selector.
func (u *UsageBased) Select(p *Pick) int {
	share := p.Scratch(len(p.Candidates))
	for i, c := range p.Candidates {
		d := c.Deployment
		share[i] = 0
		if d.RPM <= 0 && d.TPM <= 0 {
			continue
		}
		req, tok := u.Source.Usage(d.ID)
		if d.RPM > 0 {
			share[i] = float64(req) / float64(d.RPM)
		}
		if d.TPM > 0 {
			share[i] = max(share[i], float64(tok)/float64(d.TPM))
		}
	}
	return argminRandom(share, 0, p.Rand)
}

var _ Selector = (*UsageBased)(nil)
