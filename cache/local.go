package cache

import (
	"bytes"
	"sync"
	"sync/atomic"
	"time"
)

// Local is the node's bounded in-process cache (SPEC 18): the whole cache
// when local-only, the node's copy when Redis is down. It holds encoded
// entries, evicts the least recently used when a new one would pass
// max_local_bytes, and drops an expired entry when it is next looked up.
// Every operation but Purge is O(1); it is safe for concurrent use.
//
// It is laid out for the garbage collector: the entries live in one slice
// linked by index (no list element, no item object per entry), the index
// maps a key to a slot (neither holds a pointer, so the collector never
// scans it) and a team and model are a small id, so an entry costs the
// collector one pointer, its bytes. A node full of entries (a 256 MiB
// store holds hundreds of thousands) made every collection mark four
// objects per entry, which cost a cacheable miss more than the cache's
// own work.
type Local struct {
	// immutable after NewLocal
	maxBytes int64

	hits, misses atomic.Int64

	mu         sync.Mutex
	index      map[Key]int32   // guarded by mu; the slot of each entry
	slots      []slot          // guarded by mu; entries and free slots
	head, tail int32           // guarded by mu; most and least recently used (-1: none)
	free       int32           // guarded by mu; a free slot, linked by next (-1: none)
	scopes     []scope         // guarded by mu; team and model of a scope id
	scopeIDs   map[scope]int32 // guarded by mu
	bytes      int64           // guarded by mu
}

// itemOverhead is what an entry is counted beyond its bytes and its team's
// and model's names: its slot, its index entry and the slice's spare room
// (measured: 140 bytes on amd64, at a power-of-two size of the slice;
// TestLocalMemory holds the heap to what is counted), so a million tiny
// entries still count. Kept at the earlier layout's figure: the bound of
// max_local_bytes means what it meant.
const itemOverhead = 320

type slot struct {
	key        Key
	val        []byte // nil in a free slot
	expires    int64  // unix ns
	size       int64
	scope      int32
	prev, next int32
}

// NewLocal returns a cache holding at most maxBytes (entries and their
// bookkeeping).
func NewLocal(maxBytes int64) *Local {
	return &Local{maxBytes: maxBytes, index: map[Key]int32{}, head: -1, tail: -1, free: -1, scopeIDs: map[scope]int32{}}
}

// Get returns the encoded entry under k if it has not expired at now. The
// bytes are shared: the caller must not modify them.
func (l *Local) Get(k Key, now time.Time) ([]byte, bool) {
	l.mu.Lock()
	i, ok := l.index[k]
	if ok {
		if now.UnixNano() >= l.slots[i].expires {
			l.removeLocked(i)
		} else {
			l.unlinkLocked(i)
			l.pushFrontLocked(i)
			val := l.slots[i].val
			l.mu.Unlock()
			l.hits.Add(1)
			return val, true
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
	l.mu.Lock()
	defer l.mu.Unlock()
	if i, ok := l.index[k]; ok {
		l.removeLocked(i)
	}
	for l.bytes+size > l.maxBytes {
		l.removeLocked(l.tail)
	}
	sc := scope{team, model}
	id, ok := l.scopeIDs[sc]
	if !ok {
		id = int32(len(l.scopes))
		l.scopes = append(l.scopes, sc)
		l.scopeIDs[sc] = id
	}
	i := l.free
	if i >= 0 {
		l.free = l.slots[i].next
	} else {
		i = int32(len(l.slots))
		l.slots = append(l.slots, slot{})
	}
	l.slots[i] = slot{key: k, val: val, expires: now.Add(ttl).UnixNano(), size: size, scope: id}
	l.pushFrontLocked(i)
	l.index[k] = i
	l.bytes += size
	return true
}

// Keep stores val under k like Put unless k holds these very bytes
// already, in which case it only marks k as the most recently used: a copy
// of an entry read from Redis, kept on every hit, costs a lookup once it
// is held, and a newer entry under the key (another node's fresh answer)
// replaces the older one. It reports whether k is held afterwards.
func (l *Local) Keep(k Key, val []byte, team, model string, now time.Time, ttl time.Duration) bool {
	l.mu.Lock()
	if i, ok := l.index[k]; ok && now.UnixNano() < l.slots[i].expires && bytes.Equal(l.slots[i].val, val) {
		l.unlinkLocked(i)
		l.pushFrontLocked(i)
		l.mu.Unlock()
		return true
	}
	l.mu.Unlock()
	return l.Put(k, val, team, model, now, ttl)
}

func (l *Local) pushFrontLocked(i int32) {
	s := &l.slots[i]
	s.prev, s.next = -1, l.head
	if l.head >= 0 {
		l.slots[l.head].prev = i
	}
	l.head = i
	if l.tail < 0 {
		l.tail = i
	}
}

func (l *Local) unlinkLocked(i int32) {
	s := &l.slots[i]
	if s.prev >= 0 {
		l.slots[s.prev].next = s.next
	} else {
		l.head = s.next
	}
	if s.next >= 0 {
		l.slots[s.next].prev = s.prev
	} else {
		l.tail = s.prev
	}
}

// removeLocked drops the entry in slot i and frees the slot.
func (l *Local) removeLocked(i int32) {
	l.unlinkLocked(i)
	s := &l.slots[i]
	delete(l.index, s.key)
	l.bytes -= s.size
	*s = slot{next: l.free, prev: -1}
	l.free = i
}

// Delete removes k.
func (l *Local) Delete(k Key) {
	l.mu.Lock()
	if i, ok := l.index[k]; ok {
		l.removeLocked(i)
	}
	l.mu.Unlock()
}

// Purge removes the entries of team (every team when ""), of one model
// when model is set, and returns how many (SPEC 18, DELETE /admin/cache).
func (l *Local) Purge(team, model string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for i := l.head; i >= 0; {
		next := l.slots[i].next
		sc := l.scopes[l.slots[i].scope]
		if (team == "" || sc.team == team) && (model == "" || sc.model == model) {
			l.removeLocked(i)
			n++
		}
		i = next
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
	n, b := int64(len(l.index)), l.bytes
	l.mu.Unlock()
	return LocalStats{Hits: l.hits.Load(), Misses: l.misses.Load(), Entries: n, Bytes: b}
}
