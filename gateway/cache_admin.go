package gateway

// The response cache's administration (SPEC 18): DELETE /admin/cache and
// GET /admin/cache/stats, cluster-wide when the node has a shared store
// (package node gives it one over Redis), node-wide otherwise.
//
// A purge is recorded before anything is removed: every node learns of it
// (a notice, with a poll as backstop) and from then on refuses any entry
// of the purged scope stored at or before it, whichever copy still holds
// one, and drops its own copies; the node that took the purge refuses them
// at once, and then removes the shared entries in bounded batches. A node
// with Redis up answers only from Redis (its own copy serves while Redis is
// down), so once the purge has answered no node serves a purged entry.
//
// The counters: every node counts per team and model, keeps its own
// totals, and adds what it counted to the shared counters every
// cacheStatsEvery and before it answers the stats, which sum every node's.

import (
	"context"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"switchyard/cache"
)

// CacheShared is the cluster-wide part of the cache's administration, in
// the gateway's terms (cache/shared implements it over Redis).
type CacheShared interface {
	// Purge records and announces a purge of team ("" every team) and
	// model ("" every model) made at at, then removes the shared entries of
	// that scope; keep is how long the record must outlive them. It
	// returns how many shared entries it removed.
	Purge(ctx context.Context, team, model string, at time.Time, keep time.Duration) (int, error)
	// Watch calls apply with every purge on record and every one
	// announced, until ctx ends; ready once it listens.
	Watch(ctx context.Context, poll time.Duration, apply func(team, model string, at time.Time), ready func())
	// Add adds a node's counts to the shared ones.
	Add(ctx context.Context, ss []cache.Stat) error
	// Stats reads the shared counts, one per team and model.
	Stats(ctx context.Context) ([]cache.Stat, error)
}

// cacheStatsEvery is how often a node adds its counts to the shared ones.
const cacheStatsEvery = 2 * time.Second

// cacheStats is the node's counts: its totals since start (what a node
// without a shared store answers) and what it has not sent yet.
type cacheStats struct {
	total, unsent cache.Counters
}

func (c *cacheStats) count(team, model, result string, tokens int64, usd float64) {
	c.total.Count(team, model, result, tokens, usd)
	c.unsent.Count(team, model, result, tokens, usd)
}

func (c *cacheStats) stored(team, model string, size int) {
	c.total.Stored(team, model, size)
	c.unsent.Stored(team, model, size)
}

// TeamNames and ForgetTeams let the sweep of gone teams drop a deleted
// team's counts (goneteams.go): they grow with the catalog, not its churn.
func (c *cacheStats) TeamNames(fn func(team string)) { c.total.Teams(fn) }

func (c *cacheStats) ForgetTeams(drop func(team string) bool) {
	forget := func(team, _ string) bool { return drop(team) }
	c.total.Forget(forget)
	c.unsent.Forget(forget)
}

// cacheCount counts one cacheable request for the stats (SPEC 18).
func (s *Server) cacheCount(team, model, result string, tokens int64, usd float64) {
	s.cacheStats.count(team, model, result, tokens, usd)
}

// SetCacheShared makes the node's cache administration cluster-wide: it
// applies every purge another node announces (bounded wait for the
// subscription) and sends its counts every cacheStatsEvery until Close,
// which sends the last ones. Call before serving.
func (n *Node) SetCacheShared(cs CacheShared) {
	s := n.Server
	s.cacheShared = cs
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	go cs.Watch(ctx, 5*time.Second, s.applyPurge, func() { close(ready) })
	select {
	case <-ready:
	case <-time.After(2 * time.Second):
		s.Logger.Warn("cache purge notices not subscribed yet; polling every 5s until they are")
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(cacheStatsEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				_ = s.sendCacheStats(ctx)
			}
		}
	}()
	n.OnClose(func(ctx context.Context) error {
		cancel()
		<-done
		return s.sendCacheStats(ctx) // the last counts; bounded by the store's timeout
	})
}

// applyPurge is a purge this node took or heard of: entries of its scope
// stored at or before at are refused from now on, and the node's own
// copies are dropped.
func (s *Server) applyPurge(team, model string, at time.Time) {
	if !s.cachePurges.Record(team, model, at) {
		return // known already
	}
	if s.cacheLocal != nil {
		s.cacheLocal.Purge(team, model)
	}
	// and the entries counted but not sent yet: sent after the purge reset
	// the shared counts, they would count the purged entries again
	s.cacheStats.total.ResetEntries(team, model)
	s.cacheStats.unsent.ResetEntries(team, model)
}

// sendCacheStats adds what the node counted since the last send to the
// shared counts; on failure the counts wait for the next send.
func (s *Server) sendCacheStats(ctx context.Context) error {
	if s.cacheShared == nil {
		return nil
	}
	ss := s.cacheStats.unsent.Drain()
	err := s.cacheShared.Add(ctx, ss)
	if err != nil {
		s.cacheStats.unsent.Undrain(ss)
	}
	return err
}

// handleCachePurge is DELETE /admin/cache?team=&model= (SPEC 18): it
// purges a team's entries (or one model's of that team, or every entry
// without parameters) on every node and in Redis, and answers
// {"removed": N}: the shared entries removed (each once, however many
// nodes held a copy), or this node's without a shared store. Redis
// unreachable: 503, after this node's own purge.
func (s *Server) handleCachePurge(c *gin.Context) {
	team, model := c.Query("team"), c.Query("model")
	if model != "" && team == "" {
		writeError(c, errBadRequest("model", "model: name the team too (?team=...&model=...): entries are per team"))
		return
	}
	now := time.Now()
	local := 0
	if s.cacheLocal != nil {
		local = s.cacheLocal.Purge(team, model)
	}
	s.applyPurge(team, model, now)
	if s.cacheShared == nil {
		c.JSON(http.StatusOK, gin.H{"removed": local, "shared": false})
		return
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), 30*time.Second)
	defer cancel()
	n, err := s.cacheShared.Purge(ctx, team, model, now, s.cachePolicy.MaxTTL())
	if err != nil {
		s.Logger.Warn("cache purge not complete in Redis", "team", team, "model", model, "removed", n, "error", err)
		writeError(c, &apiError{Status: http.StatusServiceUnavailable, Type: "redis_unavailable", Code: "redis_unavailable",
			Message: "purged on this node, but not (completely) in Redis: " + err.Error() + "; retry the purge"})
		return
	}
	c.JSON(http.StatusOK, gin.H{"removed": n, "shared": true, "node_removed": local})
}

// cacheStatsView is the body of GET /admin/cache/stats.
type cacheStatsView struct {
	Shared bool   `json:"shared"` // summed over every node (false: this node's own, Redis off or down)
	Scope  string `json:"scope"`  // cluster | node
	Node   string `json:"node"`
	cache.Stat
	HitRate float64     `json:"hit_rate"`
	Teams   []statView  `json:"teams"`
	Models  []statView  `json:"models"`
	Local   localCounts `json:"local"` // this node's store now
}

type statView struct {
	cache.Stat
	HitRate float64 `json:"hit_rate"`
}

type localCounts struct {
	Entries int64 `json:"entries"`
	Bytes   int64 `json:"bytes"`
}

// handleCacheStats is GET /admin/cache/stats (SPEC 18): hits, misses,
// coalesced, bypasses, entries and bytes stored, tokens and USD saved, per
// team and per model, summed over the cluster ("shared": true) or, without
// a shared store or with Redis unreachable, this node's ("shared": false).
func (s *Server) handleCacheStats(c *gin.Context) {
	v := cacheStatsView{Scope: "node", Node: s.Config.Server.NodeID}
	var rows []cache.Stat
	if s.cacheShared != nil {
		ctx, cancel := context.WithTimeout(c.Request.Context(), 5*time.Second)
		if err := s.sendCacheStats(ctx); err == nil {
			if rows, err = s.cacheShared.Stats(ctx); err == nil {
				v.Shared, v.Scope = true, "cluster"
			}
		}
		cancel()
	}
	if !v.Shared {
		rows = s.cacheStats.total.Snapshot()
	}
	all, teams, models := cache.Totals(rows)
	v.Stat, v.HitRate = all, all.HitRate()
	v.Teams, v.Models = views(teams), views(models)
	if s.cacheLocal != nil {
		st := s.cacheLocal.Stats()
		v.Local = localCounts{Entries: st.Entries, Bytes: st.Bytes}
	}
	c.JSON(http.StatusOK, v)
}

func views(ss []cache.Stat) []statView {
	out := make([]statView, len(ss))
	for i := range ss {
		out[i] = statView{Stat: ss[i], HitRate: ss[i].HitRate()}
	}
	return out
}
