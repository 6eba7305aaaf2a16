package sessions

import (
	"context"
	"hash/maphash"
	"sync"
	"time"

	"switchyard/internal/intern"
)

// Store keeps a session's tier pins (SPEC 4) and deployment pins (SPEC 8)
// with inactivity TTLs: every Set replaces the value and restarts its TTL;
// a Get does not extend it. Tier and deployment pins are separate
// namespaces, so one key can hold both.
//
// Keys are built by the caller from a Detect key (see ScopedKey). A Get
// that finds nothing, or only an expired entry, returns ok false and a nil
// error; an error means the store could not answer (the caller falls back
// to local behaviour, SPEC 9). Set with ttl <= 0 removes the entry.
// Implementations are safe for concurrent use.
type Store interface {
	GetTier(ctx context.Context, key string) (tier string, ok bool, err error)
	SetTier(ctx context.Context, key string, tier string, ttl time.Duration) error
	GetDeployment(ctx context.Context, key string) (id string, ok bool, err error)
	SetDeployment(ctx context.Context, key string, id string, ttl time.Duration) error
}

// ScopedKey is the store key of a pin for one session and one scope: the
// tier alias for a tier pin (pins are per team, alias and session, SPEC 4),
// or the public model for a deployment pin (a session that moves to another
// pool must not look up a deployment of the old one).
func ScopedKey(session, scope string) string { return session + "|" + scope }

// DefaultMaxEntries is the cap of a Local store when NewLocal is given none.
const DefaultMaxEntries = 100_000

// maxValues caps the distinct pin values a Local interns (tier names and
// deployment ids: the catalog's, so a few hundred); a Set of a new value
// past it is not stored (a pin is a hint; the request is routed afresh).
const maxValues = 1 << 16

// Local is the node-local Store (SPEC 9: the embedded default, and the
// fallback while Redis is unreachable). Memory is bounded: at most
// maxEntries pins (tier and deployment together); a Set into a full shard
// evicts the entry set longest ago, which, since every Set refreshes the
// TTL, is also the one idle longest. Expired entries are dropped lazily:
// when read, and when each Set checks the two least recently set entries.
// Every operation is O(1) under one shard's lock. Local never returns an
// error and ignores ctx.
//
// The store holds no pointers per entry, so the garbage collector does not
// walk it: a key is kept as two independent 64-bit hashes (the first finds
// the entry, the second confirms it: a false match needs 128 bits to
// collide), a value as an index into a table of the distinct values, an
// expiry as Unix nanoseconds, and the recency list as indexes into one
// slice per shard. With 100,000 pins the pointer-per-entry layout this
// replaced was a third of a busy gateway's live objects.
type Local struct {
	// Immutable after NewLocal.
	clock       func() time.Time
	seed, check [2]maphash.Seed // per kind: the namespaces never share a hash
	perShard    int
	shards      []localShard
	values      *intern.Table // the distinct pin values
}

// none is the null entry index.
const none = -1

type localShard struct {
	mu sync.RWMutex
	// Guarded by mu: the entries by key hash, the entries themselves (free
	// ones chained through next from free), and the recency list from the
	// most recently set (head) to the least (tail).
	items      map[uint64]int32
	ents       []localEntry
	free       int32
	head, tail int32
}

// kind separates the tier and the deployment namespaces.
type kind uint8

const (
	kindTier kind = iota
	kindDeployment
)

type localEntry struct {
	key, check uint64
	expires    int64  // Unix ns
	value      uint32 // index into values
	prev, next int32  // toward head, toward tail
}

// sweepPerSet is how many of the least recently set entries each Set checks
// for expiry, so expired pins are reclaimed without a timer goroutine.
const sweepPerSet = 2

// NewLocal returns an empty Local. clock is the time source (nil means
// time.Now); tests pass a fake. maxEntries caps the number of pins (<= 0
// means DefaultMaxEntries). Large stores are split into 16 shards so
// concurrent requests rarely share a lock; the cap is divided among them.
func NewLocal(clock func() time.Time, maxEntries int) *Local {
	if clock == nil {
		clock = time.Now
	}
	if maxEntries <= 0 {
		maxEntries = DefaultMaxEntries
	}
	n := 1
	if maxEntries >= 16*64 {
		n = 16
	}
	l := &Local{
		clock:    clock,
		seed:     [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()},
		check:    [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()},
		perShard: maxEntries / n, shards: make([]localShard, n),
		values: intern.New(maxValues),
	}
	for i := range l.shards {
		l.shards[i] = localShard{items: make(map[uint64]int32), free: none, head: none, tail: none}
	}
	return l
}

// hashes are k's two hashes in namespace kd.
func (l *Local) hashes(kd kind, k string) (key, check uint64) {
	return maphash.String(l.seed[kd], k), maphash.String(l.check[kd], k)
}

func (l *Local) shard(key uint64) *localShard {
	return &l.shards[(key>>32)%uint64(len(l.shards))]
}

// GetTier returns the tier pin of key.
func (l *Local) GetTier(_ context.Context, key string) (string, bool, error) {
	v, ok := l.get(kindTier, key)
	return v, ok, nil
}

// SetTier pins key to tier for ttl of inactivity.
func (l *Local) SetTier(_ context.Context, key string, tier string, ttl time.Duration) error {
	l.set(kindTier, key, tier, ttl, false)
	return nil
}

// RenewTier pins key to tier for ttl, as SetTier, unless key already holds
// tier set at most a ninth of ttl ago: then it is left as it is and
// RenewTier reports true. A writer that keeps a shared copy of the pin
// alive uses it to skip renewals: the copy it wrote then still has eight
// ninths of ttl to live, and this one keeps the same expiry (a writer that
// sets pins for 9/8 of the inactivity they are kept for keeps each at
// least that long after its last request: edge's pinLife).
func (l *Local) RenewTier(key, tier string, ttl time.Duration) (kept bool) {
	return l.set(kindTier, key, tier, ttl, true)
}

// GetDeployment returns the deployment pin of key.
func (l *Local) GetDeployment(_ context.Context, key string) (string, bool, error) {
	v, ok := l.get(kindDeployment, key)
	return v, ok, nil
}

// SetDeployment pins key to the deployment id for ttl of inactivity.
func (l *Local) SetDeployment(_ context.Context, key string, id string, ttl time.Duration) error {
	l.set(kindDeployment, key, id, ttl, false)
	return nil
}

// Len is the number of entries held, expired ones not yet dropped included.
func (l *Local) Len() int {
	n := 0
	for i := range l.shards {
		s := &l.shards[i]
		s.mu.RLock()
		n += len(s.items)
		s.mu.RUnlock()
	}
	return n
}

// find is the index of the entry of (key, check), or none. Call with mu held.
func (s *localShard) find(key, check uint64) int32 {
	i, ok := s.items[key]
	if !ok || s.ents[i].check != check {
		return none
	}
	return i
}

func (l *Local) get(kd kind, k string) (string, bool) {
	key, check := l.hashes(kd, k)
	s := l.shard(key)
	now := l.clock().UnixNano()
	s.mu.RLock()
	i := s.find(key, check)
	live := i != none && now < s.ents[i].expires
	var id uint32
	if live {
		id = s.ents[i].value
	}
	s.mu.RUnlock()
	if i != none && !live {
		s.mu.Lock()
		if i := s.find(key, check); i != none && now >= s.ents[i].expires {
			s.removeLocked(i)
		}
		s.mu.Unlock()
	}
	if !live {
		return "", false
	}
	return l.values.Value(id), true
}

// set stores value under k for ttl (ttl <= 0 deletes). With keepRecent
// an entry that already holds value, set at most ttl/9 ago, is left as it
// is, and set reports kept.
func (l *Local) set(kd kind, k, value string, ttl time.Duration, keepRecent bool) (kept bool) {
	key, check := l.hashes(kd, k)
	s := l.shard(key)
	var id uint32
	if ttl > 0 {
		var ok bool
		if id, ok = l.values.ID(value); !ok {
			ttl = 0 // not storable: drop what the key held, so no stale pin is served
		}
	}
	now := l.clock().UnixNano()
	s.mu.Lock()
	defer s.mu.Unlock()
	i, found := s.items[key]
	if found && s.ents[i].check != check {
		s.removeLocked(i) // a 64-bit collision: the newer key takes the place
		found = false
	}
	if ttl <= 0 {
		if found {
			s.removeLocked(i)
		}
		return false
	}
	exp := now + int64(ttl)
	if found {
		e := &s.ents[i]
		if keepRecent && e.value == id && e.expires-now >= int64(ttl-ttl/9) {
			return true
		}
		e.value, e.expires = id, exp
		s.unlinkLocked(i)
		s.pushFrontLocked(i)
		s.sweepLocked(now, sweepPerSet)
		return false
	}
	s.sweepLocked(now, sweepPerSet)
	for len(s.items) >= l.perShard && s.tail != none {
		s.removeLocked(s.tail) // the one set longest ago
	}
	if s.free != none {
		i = s.free
		s.free = s.ents[i].next
	} else {
		i = int32(len(s.ents))
		s.ents = append(s.ents, localEntry{})
	}
	s.ents[i] = localEntry{key: key, check: check, expires: exp, value: id, prev: none, next: none}
	s.items[key] = i
	s.pushFrontLocked(i)
	return false
}

// sweepLocked drops expired entries among the n least recently set ones.
func (s *localShard) sweepLocked(now int64, n int) {
	for i := s.tail; i != none && n > 0; n-- {
		prev := s.ents[i].prev
		if now >= s.ents[i].expires {
			s.removeLocked(i)
		}
		i = prev
	}
}

// removeLocked drops entry i and puts it on the free list.
func (s *localShard) removeLocked(i int32) {
	s.unlinkLocked(i)
	delete(s.items, s.ents[i].key)
	s.ents[i] = localEntry{next: s.free, prev: none}
	s.free = i
}

func (s *localShard) unlinkLocked(i int32) {
	e := &s.ents[i]
	if e.prev != none {
		s.ents[e.prev].next = e.next
	} else {
		s.head = e.next
	}
	if e.next != none {
		s.ents[e.next].prev = e.prev
	} else {
		s.tail = e.prev
	}
	e.prev, e.next = none, none
}

func (s *localShard) pushFrontLocked(i int32) {
	e := &s.ents[i]
	e.next = s.head
	if s.head != none {
		s.ents[s.head].prev = i
	}
	s.head = i
	if s.tail == none {
		s.tail = i
	}
}

var _ Store = (*Local)(nil)
