package routing

import (
	"hash/maphash"
	"sync"

	"switchyard/internal/intern"
)

// warmCache remembers, per session key, the deployment that last served the
// session and when (SPEC 5.1 warm prompt cache). It is node-local and
// bounded: entries expire after the TTL and a full shard first drops expired
// entries, then an arbitrary one. Sharded so sessions rarely contend.
//
// The TTL (warm_cache_ttl) is not kept here but passed by the router on each
// call: the memory outlives a config reload (Router.Reconfigure hands it to
// the new router), and the reloaded TTL must apply to it at once.
//
// It holds no pointers per entry, so the garbage collector does not walk it
// (100,000 sessions kept 100,000 key strings alive): a session is kept as
// its seeded 64-bit hash, a deployment as an index into the table of the
// ids seen. Two sessions whose hashes collide share one hint, which only
// steers a choice between healthy deployments.
type warmCache struct {
	// Immutable after construction.
	seed     maphash.Seed
	perShard int

	shards [warmShards]warmShard
	ids    *intern.Table // the deployment ids seen
}

const warmShards = 16

// maxWarmDeployments bounds the deployment ids the cache interns (the
// catalog's: a handful); a put of a new id past it is not recorded.
const maxWarmDeployments = 1 << 16

type warmShard struct {
	mu sync.Mutex
	m  map[uint64]warmEntry // guarded by mu; keyed by the session's hash
}

type warmEntry struct {
	deployment uint32 // index into warmCache.ids
	at         int64  // tick of the serving attempt's completion
}

func newWarmCache(capacity int) *warmCache {
	w := &warmCache{seed: maphash.MakeSeed(), perShard: max(capacity/warmShards, 1), ids: intern.New(maxWarmDeployments)}
	for i := range w.shards {
		w.shards[i].m = map[uint64]warmEntry{}
	}
	return w
}

func (w *warmCache) shard(session string) (*warmShard, uint64) {
	h := maphash.String(w.seed, session)
	return &w.shards[h%warmShards], h
}

// get returns the session's warm deployment and when it served, if within
// ttl ticks.
func (w *warmCache) get(session string, now, ttl int64) (string, int64) {
	s, h := w.shard(session)
	s.mu.Lock()
	e, ok := s.m[h]
	s.mu.Unlock()
	if !ok || now-e.at > ttl {
		return "", 0
	}
	return w.ids.Value(e.deployment), e.at
}

// put records that deployment served session at now; ttl (ticks) tells
// which entries a full shard may drop as expired.
func (w *warmCache) put(session, deployment string, now, ttl int64) {
	idx, ok := w.ids.ID(deployment)
	if !ok {
		return
	}
	s, h := w.shard(session)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[h]; !ok && len(s.m) >= w.perShard {
		s.evictLocked(now, ttl, w.perShard)
	}
	s.m[h] = warmEntry{deployment: idx, at: now}
}

// evictLocked drops expired entries or, when none has expired, arbitrary
// ones down to seven eighths of the bound, so eviction costs O(1) amortized.
func (s *warmShard) evictLocked(now, ttl int64, bound int) {
	n := len(s.m)
	for k, e := range s.m {
		if now-e.at > ttl {
			delete(s.m, k)
		}
	}
	if len(s.m) < n {
		return
	}
	for k := range s.m {
		if len(s.m) <= bound-bound/8-1 {
			return
		}
		delete(s.m, k)
	}
}
