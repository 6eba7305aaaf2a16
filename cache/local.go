package cache

import (
	"container/list"
	"sync"
	"sync/atomic"
	"time"
)

// Local is the node's bounded in-process cache (SPEC 18): the whole cache
// when local-only, the node's copy when Redis is down. It holds encoded
// entries, evicts the least recently used when a new one would pass
// max_local_bytes, and drops an expired entry when it is next looked up.
// Every operation but Purge is O(1); it is safe for concurrent use.
type Local struct {
	// immutable after NewLocal
	maxBytes int64

	hits, misses atomic.Int64

	mu    sync.Mutex
	lru   *list.List // guarded by mu; front is the most recently used *item
	items map[Key]*list.Element
	bytes int64 // guarded by mu
}

// itemOverhead is what an entry costs beyond its bytes: the map slot, the
// list element and the item itself (measured: about 320 bytes on amd64,
// TestLocalMemory), so a million tiny entries still count.
const itemOverhead = 320

type item struct {
	key         Key
	val         []byte
	team, model string
	expires     time.Time
	size        int64
}

// NewLocal returns a cache holding at most maxBytes (entries and their
// bookkeeping).
func NewLocal(maxBytes int64) *Local {
	return &Local{maxBytes: maxBytes, lru: list.New(), items: map[Key]*list.Element{}}
}

// Get returns the encoded entry under k if it has not expired at now. The
// bytes are shared: the caller must not modify them.
func (l *Local) Get(k Key, now time.Time) ([]byte, bool) {
	l.mu.Lock()
	el, ok := l.items[k]
	if ok {
		it := el.Value.(*item)
		if !now.Before(it.expires) {
			l.removeLocked(el)
			ok = false
		} else {
			l.lru.MoveToFront(el)
			l.mu.Unlock()
			l.hits.Add(1)
			return it.val, true
		}
	}
	l.mu.Unlock()
	l.misses.Add(1)
	return nil, false
}

// Put stores val under k until now+ttl, for team and model (what Purge
// selects by). It reports false when val alone is larger than the cache.
// val is kept as given: the caller must not modify it afterwards.
func (l *Local) Put(k Key, val []byte, team, model string, now time.Time, ttl time.Duration) bool {
	size := int64(len(val)+len(team)+len(model)) + itemOverhead
	if size > l.maxBytes || ttl <= 0 {
		return false
	}
	it := &item{key: k, val: val, team: team, model: model, expires: now.Add(ttl), size: size}
	l.mu.Lock()
	defer l.mu.Unlock()
	if el, ok := l.items[k]; ok {
		l.removeLocked(el)
	}
	for l.bytes+size > l.maxBytes {
		l.removeLocked(l.lru.Back())
	}
	l.items[k] = l.lru.PushFront(it)
	l.bytes += size
	return true
}

func (l *Local) removeLocked(el *list.Element) {
	it := l.lru.Remove(el).(*item)
	delete(l.items, it.key)
	l.bytes -= it.size
}

// Delete removes k.
func (l *Local) Delete(k Key) {
	l.mu.Lock()
	if el, ok := l.items[k]; ok {
		l.removeLocked(el)
	}
	l.mu.Unlock()
}

// Purge removes the entries of team (every team when ""), of one model
// when model is set, and returns how many (SPEC 18, DELETE /admin/cache).
func (l *Local) Purge(team, model string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for el := l.lru.Front(); el != nil; {
		next := el.Next()
		it := el.Value.(*item)
		if (team == "" || it.team == team) && (model == "" || it.model == model) {
			l.removeLocked(el)
			n++
		}
		el = next
	}
	return n
}

// LocalStats is a snapshot of the local cache.
type LocalStats struct {
	Hits, Misses   int64
	Entries, Bytes int64
}

// Stats returns the counters and the current size (switchyard_cache_bytes).
func (l *Local) Stats() LocalStats {
	l.mu.Lock()
	n, b := int64(len(l.items)), l.bytes
	l.mu.Unlock()
	return LocalStats{Hits: l.hits.Load(), Misses: l.misses.Load(), Entries: n, Bytes: b}
}
