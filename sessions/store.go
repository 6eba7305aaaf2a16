package sessions

import (
	"context"
	"hash/maphash"
	"sync"
	"time"
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

// Local is the node-local Store (SPEC 9: the embedded default, and the
// fallback while Redis is unreachable). Memory is bounded: at most
// maxEntries pins (tier and deployment together); a Set into a full shard
// evicts the entry set longest ago, which, since every Set refreshes the
// TTL, is also the one idle longest. Expired entries are dropped lazily:
// when read, and when each Set checks the two least recently set entries.
// Every operation is O(1) under one shard's lock. Local never returns an error and ignores ctx.
type Local struct {
	// Immutable after NewLocal.
	clock    func() time.Time
	seed     maphash.Seed
	perShard int
	shards   []localShard
}

type localShard struct {
	mu sync.RWMutex
	// Guarded by mu: the entries by key, and a list of them from the most
	// recently set (head) to the least (tail).
	items      map[localKey]*localEntry
	head, tail *localEntry
}

// kind separates the tier and the deployment namespaces.
type kind uint8

const (
	kindTier kind = iota
	kindDeployment
)

type localKey struct {
	kind kind
	key  string
}

type localEntry struct {
	k          localKey
	value      string
	expires    time.Time
	prev, next *localEntry // toward head, toward tail
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
	l := &Local{clock: clock, seed: maphash.MakeSeed(), perShard: maxEntries / n, shards: make([]localShard, n)}
	for i := range l.shards {
		l.shards[i].items = make(map[localKey]*localEntry)
	}
	return l
}

func (l *Local) shard(key string) *localShard {
	if len(l.shards) == 1 {
		return &l.shards[0]
	}
	return &l.shards[maphash.String(l.seed, key)%uint64(len(l.shards))]
}

// GetTier returns the tier pin of key.
func (l *Local) GetTier(_ context.Context, key string) (string, bool, error) {
	v, ok := l.get(localKey{kindTier, key})
	return v, ok, nil
}

// SetTier pins key to tier for ttl of inactivity.
func (l *Local) SetTier(_ context.Context, key string, tier string, ttl time.Duration) error {
	l.set(localKey{kindTier, key}, tier, ttl, false)
	return nil
}

// RenewTier pins key to tier for ttl, as SetTier, unless key already holds
// tier set at most a quarter of ttl ago: then it is left as it is and
// RenewTier reports true. A writer that keeps a shared copy of the pin
// alive uses it to skip renewals: the copy it wrote then still has three
// quarters of ttl to live, and this one keeps the same expiry.
func (l *Local) RenewTier(key, tier string, ttl time.Duration) (kept bool) {
	return l.set(localKey{kindTier, key}, tier, ttl, true)
}

// GetDeployment returns the deployment pin of key.
func (l *Local) GetDeployment(_ context.Context, key string) (string, bool, error) {
	v, ok := l.get(localKey{kindDeployment, key})
	return v, ok, nil
}

// SetDeployment pins key to the deployment id for ttl of inactivity.
func (l *Local) SetDeployment(_ context.Context, key string, id string, ttl time.Duration) error {
	l.set(localKey{kindDeployment, key}, id, ttl, false)
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

func (l *Local) get(k localKey) (string, bool) {
	s := l.shard(k.key)
	now := l.clock()
	s.mu.RLock()
	e, ok := s.items[k]
	var v string
	live := ok && now.Before(e.expires)
	if live {
		v = e.value
	}
	s.mu.RUnlock()
	if ok && !live {
		s.mu.Lock()
		if e, ok := s.items[k]; ok && !now.Before(e.expires) {
			s.removeLocked(e)
		}
		s.mu.Unlock()
	}
	return v, live
}

// set stores value under k for ttl (ttl <= 0 deletes). With keepRecent
// an entry that already holds value, set at most ttl/4 ago, is left as it
// is, and set reports kept.
func (l *Local) set(k localKey, value string, ttl time.Duration, keepRecent bool) (kept bool) {
	s := l.shard(k.key)
	now := l.clock()
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.items[k]
	if ttl <= 0 {
		if ok {
			s.removeLocked(e)
		}
		return false
	}
	if ok && keepRecent && e.value == value && e.expires.Sub(now) >= ttl-ttl/4 {
		return true
	}
	if ok {
		e.value, e.expires = value, now.Add(ttl)
		s.unlinkLocked(e)
		s.pushFrontLocked(e)
		s.sweepLocked(now, sweepPerSet)
		return false
	}
	s.sweepLocked(now, sweepPerSet)
	for len(s.items) >= l.perShard && s.tail != nil {
		s.removeLocked(s.tail) // the one set longest ago
	}
	e = &localEntry{k: k, value: value, expires: now.Add(ttl)}
	s.items[k] = e
	s.pushFrontLocked(e)
	return false
}

// sweepLocked drops expired entries among the n least recently set ones.
func (s *localShard) sweepLocked(now time.Time, n int) {
	for e := s.tail; e != nil && n > 0; n-- {
		prev := e.prev
		if !now.Before(e.expires) {
			s.removeLocked(e)
		}
		e = prev
	}
}

func (s *localShard) removeLocked(e *localEntry) {
	s.unlinkLocked(e)
	delete(s.items, e.k)
}

func (s *localShard) unlinkLocked(e *localEntry) {
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		s.head = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		s.tail = e.prev
	}
	e.prev, e.next = nil, nil
}

func (s *localShard) pushFrontLocked(e *localEntry) {
	e.next = s.head
	if s.head != nil {
		s.head.prev = e
	}
	s.head = e
	if s.tail == nil {
		s.tail = e
	}
}

var _ Store = (*Local)(nil)
