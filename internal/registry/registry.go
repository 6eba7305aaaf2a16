// Package registry is a map of records by name, for the per-team and
// per-level records a node keeps (the edge state's teams, the local
// limiter's teams and key and user levels). It replaces sync.Map there:
// with 10,000 teams a sync.Map held one or two nodes of its own per entry,
// about 15,000 objects the garbage collector marked on every cycle, where
// a map keeps its entries in a few large arrays. The local limiter looks a
// team and each of its levels up on every admission, so the map is split
// into shards by a hash of the name, each under its own read-write lock a
// cache line away from the others: concurrent readers on many cores do not
// all write one lock's reader count.
package registry

import (
	"hash/maphash"
	"sync"
)

// shards is the number of shards of a Map (a power of two).
const shards = 32

// seed hashes names to shards, the same in every Map of the process.
var seed = maphash.MakeSeed()

// Map holds records of type V by name. The zero value is empty and ready
// for use; a Map must not be copied after first use.
type Map[V comparable] struct {
	s [shards]shard[V]
}

// shard is one part of a Map. The padding keeps two shards' locks at least
// a cache line apart, so readers of one never write the line of another.
type shard[V comparable] struct {
	mu sync.RWMutex
	m  map[string]V // guarded by mu
	_  [64]byte
}

func (g *Map[V]) shard(name string) *shard[V] {
	return &g.s[maphash.String(seed, name)&(shards-1)]
}

// Load returns the record of name, if any.
func (g *Map[V]) Load(name string) (V, bool) {
	s := g.shard(name)
	s.mu.RLock()
	v, ok := s.m[name]
	s.mu.RUnlock()
	return v, ok
}

// LoadOrStore returns the record of name, storing v first when there is
// none; loaded reports whether it was there.
func (g *Map[V]) LoadOrStore(name string, v V) (actual V, loaded bool) {
	s := g.shard(name)
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.m[name]; ok {
		return old, true
	}
	if s.m == nil {
		s.m = map[string]V{}
	}
	s.m[name] = v
	return v, false
}

// Delete removes the record of name.
func (g *Map[V]) Delete(name string) {
	s := g.shard(name)
	s.mu.Lock()
	delete(s.m, name)
	s.mu.Unlock()
}

// CompareAndDelete removes the record of name when it is v, and reports
// whether it did.
func (g *Map[V]) CompareAndDelete(name string, v V) bool {
	s := g.shard(name)
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.m[name]; !ok || old != v {
		return false
	}
	delete(s.m, name)
	return true
}

// Len is the number of records.
func (g *Map[V]) Len() int {
	n := 0
	for i := range g.s {
		s := &g.s[i]
		s.mu.RLock()
		n += len(s.m)
		s.mu.RUnlock()
	}
	return n
}

// Range calls fn with every record, a shard at a time, each on a snapshot
// taken under its lock: fn may take a record's own lock, or change the map.
func (g *Map[V]) Range(fn func(name string, v V)) {
	type rec struct {
		name string
		v    V
	}
	var all []rec
	for i := range g.s {
		s := &g.s[i]
		s.mu.RLock()
		all = all[:0]
		for name, v := range s.m {
			all = append(all, rec{name, v})
		}
		s.mu.RUnlock()
		for _, r := range all {
			fn(r.name, r.v)
		}
	}
}
