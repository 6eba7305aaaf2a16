package routing

import (
	"hash/maphash"
	"sync"
)

// warmCache remembers, per session key, the deployment that last served the
// session and when (SPEC 5.1 warm prompt cache). It is node-local and
// bounded: entries expire after ttl and a full shard first drops expired
// entries, then an arbitrary one. Sharded so sessions rarely contend.
type warmCache struct {
	// Immutable after construction.
	seed     maphash.Seed
	ttl      int64 // ticks
	perShard int

	shards [warmShards]warmShard
}

const warmShards = 16

type warmShard struct {
	mu sync.Mutex
	m  map[string]warmEntry // guarded by mu
}

type warmEntry struct {
	deployment string
	at         int64 // tick of the serving attempt's completion
}

func newWarmCache(ttl int64, capacity int) *warmCache {
	w := &warmCache{seed: maphash.MakeSeed(), ttl: ttl, perShard: max(capacity/warmShards, 1)}
	for i := range w.shards {
		w.shards[i].m = map[string]warmEntry{}
	}
	return w
}

func (w *warmCache) shard(session string) *warmShard {
	return &w.shards[maphash.String(w.seed, session)%warmShards]
}

// get returns the session's warm deployment and when it served, if within ttl.
func (w *warmCache) get(session string, now int64) (string, int64) {
	s := w.shard(session)
	s.mu.Lock()
	e, ok := s.m[session]
	s.mu.Unlock()
	if !ok || now-e.at > w.ttl {
		return "", 0
	}
	return e.deployment, e.at
}

// put records that deployment served session at now.
func (w *warmCache) put(session, deployment string, now int64) {
	s := w.shard(session)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[session]; !ok && len(s.m) >= w.perShard {
		s.evictLocked(now, w.ttl, w.perShard)
	}
	s.m[session] = warmEntry{deployment: deployment, at: now}
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
