// Package intern maps a bounded set of strings to small indexes and back.
// It backs the pointer-free stores of sessions and routing: their entries
// keep an index where they would keep a string, so the garbage collector
// never walks them. The strings it holds (tier names, deployment ids) are
// few and live as long as the process.
package intern

import "sync"

// Table interns at most a fixed number of distinct strings. Safe for
// concurrent use; reads of known strings take only a read lock.
type Table struct {
	max int // immutable

	mu  sync.RWMutex
	ids map[string]uint32 // guarded by mu: string -> index into all
	all []string          // guarded by mu
}

// New returns an empty table holding at most max strings.
func New(max int) *Table { return &Table{max: max, ids: map[string]uint32{}} }

// ID is v's index, added when new; ok is false when v is new and the table
// is full (the caller then does not store v).
func (t *Table) ID(v string) (id uint32, ok bool) {
	t.mu.RLock()
	id, ok = t.ids[v]
	t.mu.RUnlock()
	if ok {
		return id, true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if id, ok := t.ids[v]; ok {
		return id, true
	}
	if len(t.all) >= t.max {
		return 0, false
	}
	id = uint32(len(t.all))
	t.ids[v] = id
	t.all = append(t.all, v)
	return id, true
}

// Value is the string of id, which ID returned.
func (t *Table) Value(id uint32) string {
	t.mu.RLock()
	v := t.all[id]
	t.mu.RUnlock()
	return v
}

// Len is how many strings the table holds.
func (t *Table) Len() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.all)
}
