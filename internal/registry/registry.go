// Package registry is a map of records by name under a read-write lock,
// for the per-team records a node keeps (the edge state's, the local
// limiter's). It replaces sync.Map there: with 10,000 teams a sync.Map
// held one or two nodes of its own per entry, about 15,000 objects the
// garbage collector marked on every cycle, where a map keeps its entries
// in a few large arrays. Reads take the read lock; the records are looked
// up by name when a team is first seen and by sweeps, not on every
// request, so the lock is not contended.
package registry

import "sync"

// Map holds records of type V by name. The zero value is empty and ready
// for use; a Map must not be copied after first use.
type Map[V comparable] struct {
	mu sync.RWMutex
	m  map[string]V // guarded by mu
}

// Load returns the record of name, if any.
func (g *Map[V]) Load(name string) (V, bool) {
	g.mu.RLock()
	v, ok := g.m[name]
	g.mu.RUnlock()
	return v, ok
}

// LoadOrStore returns the record of name, storing v first when there is
// none; loaded reports whether it was there.
func (g *Map[V]) LoadOrStore(name string, v V) (actual V, loaded bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if old, ok := g.m[name]; ok {
		return old, true
	}
	if g.m == nil {
		g.m = map[string]V{}
	}
	g.m[name] = v
	return v, false
}

// Delete removes the record of name.
func (g *Map[V]) Delete(name string) {
	g.mu.Lock()
	delete(g.m, name)
	g.mu.Unlock()
}

// CompareAndDelete removes the record of name when it is v, and reports
// whether it did.
func (g *Map[V]) CompareAndDelete(name string, v V) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if old, ok := g.m[name]; !ok || old != v {
		return false
	}
	delete(g.m, name)
	return true
}

// Len is the number of records.
func (g *Map[V]) Len() int {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return len(g.m)
}

// Range calls fn with every record, on a snapshot taken under the lock: fn
// may take a record's own lock, or change the map.
func (g *Map[V]) Range(fn func(name string, v V)) {
	type rec struct {
		name string
		v    V
	}
	g.mu.RLock()
	all := make([]rec, 0, len(g.m))
	for name, v := range g.m {
		all = append(all, rec{name, v})
	}
	g.mu.RUnlock()
	for _, r := range all {
		fn(r.name, r.v)
	}
}
