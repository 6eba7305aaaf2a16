package gateway

import (
	"context"
	"time"

	"switchyard/catalog"
	"switchyard/routing"
)

// teamStore is per-team state of the node: the metric series
// (telemetry.Metrics) and the edge state (edge.State, whose methods say
// what each does).
type teamStore interface {
	TeamNames(fn func(team string))
	ForgetTeams(drop func(team string) bool)
}

// goneTeams drops from the node's team stores the state of teams the
// catalog no longer has (SPEC 16: memory grows with the bounded stores
// only, also under team churn through the admin API), once a team has been
// gone at every sweep for grace. grace outlasts the longest request (the
// live server.request_timeout), so no request admitted before the deletion
// still adds to a series or a limiter state after it is dropped: a series
// counted by such a request would vanish from /metrics, and a team created
// again would start a second one, and on the Redis edge two records of one
// team could send under one applied-batch mark. Only the sweeping
// goroutine uses a goneTeams.
type goneTeams struct {
	since map[string]time.Time // first sweep each gone team was found gone at
}

// sweep is one pass at now over stores; has reports whether the catalog
// has a team. It returns how many teams it dropped.
func (g *goneTeams) sweep(now time.Time, has func(team string) bool, grace time.Duration, stores []teamStore) int {
	if g.since == nil {
		g.since = map[string]time.Time{}
	}
	seen := map[string]struct{}{}
	for _, st := range stores {
		st.TeamNames(func(n string) {
			if n != "" && n != noTeam {
				seen[n] = struct{}{}
			}
		})
	}
	for n := range g.since {
		if _, ok := seen[n]; !ok {
			delete(g.since, n) // nothing left to drop
		}
	}
	drop := map[string]struct{}{}
	for n := range seen {
		if has(n) {
			delete(g.since, n) // back (or never gone): the wait starts again next time
			continue
		}
		at, ok := g.since[n]
		if !ok {
			g.since[n] = now
			continue
		}
		if now.Sub(at) >= grace {
			drop[n] = struct{}{}
			delete(g.since, n)
		}
	}
	if len(drop) > 0 {
		dropping := func(n string) bool { _, ok := drop[n]; return ok }
		for _, st := range stores {
			st.ForgetTeams(dropping)
		}
	}
	return len(drop)
}

// noTeam is the team label of requests no team was found for (no key,
// a wrong one); the sweep never drops its series.
const noTeam = "-"

// goneTeamsEvery is how often the node sweeps its team stores.
const goneTeamsEvery = time.Minute

// sweepGoneTeams runs the sweeps until ctx ends.
// deploymentForgetter is a usage source that keeps a record per
// deployment (ratelimit.RedisUsage): the sweep tells it which are gone.
type deploymentForgetter interface {
	ForgetDeployments(drop func(id string) bool)
}

// goneDeployments finds the deployments deleted from the catalog whose
// metric series are to be dropped: once gone at every sweep for grace (a
// request that attempted one before its deletion may still count in its
// series until then). Only the sweeping goroutine uses it.
type goneDeployments struct {
	known map[string]bool      // the deployments of the last sweep's catalog, and those still waiting
	since map[string]time.Time // first sweep each gone deployment was found gone at
}

// sweep is one pass at now over the catalog's deployments; it returns the
// ids whose series to drop.
func (g *goneDeployments) sweep(now time.Time, current map[string]*catalog.Deployment, grace time.Duration) []string {
	if g.known == nil {
		g.known, g.since = map[string]bool{}, map[string]time.Time{}
	}
	var drop []string
	for id := range g.known {
		if current[id] != nil {
			delete(g.since, id)
			continue
		}
		at, ok := g.since[id]
		switch {
		case !ok:
			g.since[id] = now
		case now.Sub(at) >= grace:
			drop = append(drop, id)
			delete(g.since, id)
			delete(g.known, id)
		}
	}
	for id := range current {
		g.known[id] = true
	}
	return drop
}

func (n *Node) sweepGoneTeams(ctx context.Context, stores []teamStore, usage routing.UsageSource) {
	var g goneTeams
	var gd goneDeployments
	t := time.NewTicker(goneTeamsEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			snap := n.Catalog.Load()
			grace := n.cfg().Server.RequestTimeout + goneTeamsEvery
			if d := g.sweep(now, func(team string) bool { return snap.Team(team) != nil }, grace, stores); d > 0 {
				n.Logger.Info("dropped the metrics and edge state of teams no longer in the catalog", "teams", d)
			}
			// and the quota usage records of deployments deleted through the
			// admin API (the usage source forgets those with nothing to write)
			if f, ok := usage.(deploymentForgetter); ok {
				f.ForgetDeployments(func(id string) bool { return snap.Deployments[id] == nil })
			}
			// and their metric series
			for _, id := range gd.sweep(now, snap.Deployments, grace) {
				n.Metrics.ForgetDeployment(id)
			}
		}
	}
}
