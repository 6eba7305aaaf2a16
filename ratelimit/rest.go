package ratelimit

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
)

// restStore holds the budget spend of the key and user levels at rest: no
// TAT ahead of now, no slot, no block, no alert of the current window, but
// spend in a budget window that is still open, which the fallback must
// start from (SPEC 3.1, 9: a level's share of a shared budget, spent
// through Local.Spend while Redis answered, or spent by the fallback
// itself). A level's full record with its key (about 210 bytes) was kept
// for the whole window (720 h by default) for every end user that spent:
// a million end users were about 200 MB per node. Here a level is its
// key's 64-bit hash and three numbers in a map without pointers, which
// the collector does not scan (SPEC 16).
//
// A level is live (in Local.subs) or at rest (here), never both: a record
// moves between the two under its shard's lock (Local.sub folds it into
// the level's new state; the sweep moves an idle level's spend here), and
// Spend adds to the record only while the level has no live state.
//
// Two levels whose keys share a hash (about 3e-8 for a million levels)
// share one record: their spend adds up, or the larger is kept.
//
// A level's budget block (Local.BlockBudget: Redis refused a reservation
// for its budget, so the fallback refuses that large a reservation until
// the period resets, up to 720 h) is kept here too while the level is at
// rest, as its hash, the block's end and the smallest reservation refused:
// a full record for every end user refused for budget was about 210 bytes
// each for the whole period.
type restStore struct {
	seed maphash.Seed // immutable after construction
	n    atomic.Int64 // spend records held
	nb   atomic.Int64 // blocks held
	s    [restShards]restShard
}

// restShards is the number of shards of a restStore (a power of two).
const restShards = 32

// restShard is one part of a restStore; the padding keeps two shards'
// locks a cache line apart.
type restShard struct {
	mu sync.Mutex
	// Guarded by mu.
	m      map[uint64]restSpend
	blocks map[uint64]restBlock
	_      [64]byte
}

// restSpend is one level's spend at rest, as localTeam holds it.
type restSpend struct {
	period int64   // budget window id
	spent  float64 // USD spent in it
	code   int64   // PeriodCode of the budget it counts in
}

// restBlock is a level's budget block (Local.BlockBudget): until when
// (ns), reservations of at least from USD are refused.
type restBlock struct {
	until int64
	from  float64
}

// merge is b and c together at now: an ended one gives way to the other;
// else the later end and the smaller reservation (both refusals are of the
// period that is open).
func (b restBlock) merge(c restBlock, now int64) restBlock {
	switch {
	case b.until <= now:
		return c
	case c.until <= now:
		return b
	}
	return restBlock{until: max(b.until, c.until), from: min(b.from, c.from)}
}

func newRestStore() *restStore { return &restStore{seed: maphash.MakeSeed()} }

// shard is key's shard and hash.
func (r *restStore) shard(key string) (*restShard, uint64) {
	h := maphash.String(r.seed, key)
	return &r.s[h&(restShards-1)], h
}

// takeLocked removes and returns h's record (sh.mu held).
func (r *restStore) takeLocked(sh *restShard, h uint64) (restSpend, bool) {
	rec, ok := sh.m[h]
	if ok {
		delete(sh.m, h)
		r.n.Add(-1)
	}
	return rec, ok
}

// putLocked stores rec as h's record, merged with one already there (only
// a hash shared by two keys makes one: sh.mu held).
func (r *restStore) putLocked(sh *restShard, h uint64, rec restSpend) {
	if old, ok := sh.m[h]; ok {
		switch {
		case old.code == rec.code && old.period == rec.period:
			rec.spent += old.spent
		case old.spent > rec.spent:
			rec = old
		}
		sh.m[h] = rec
		return
	}
	if sh.m == nil {
		sh.m = map[uint64]restSpend{}
	}
	sh.m[h] = rec
	r.n.Add(1)
}

// takeBlockLocked removes and returns h's block (until 0: none; sh.mu
// held).
func (r *restStore) takeBlockLocked(sh *restShard, h uint64) restBlock {
	b, ok := sh.blocks[h]
	if ok {
		delete(sh.blocks, h)
		r.nb.Add(-1)
	}
	return b
}

// putBlockLocked keeps block b of h, merged at now with one already there
// (sh.mu held).
func (r *restStore) putBlockLocked(sh *restShard, h uint64, b restBlock, now int64) {
	if old, ok := sh.blocks[h]; ok {
		sh.blocks[h] = old.merge(b, now)
		return
	}
	if sh.blocks == nil {
		sh.blocks = map[uint64]restBlock{}
	}
	sh.blocks[h] = b
	r.nb.Add(1)
}

// peek is key's record, if any.
func (r *restStore) peek(key string) (restSpend, bool) {
	sh, h := r.shard(key)
	sh.mu.Lock()
	rec, ok := sh.m[h]
	sh.mu.Unlock()
	return rec, ok
}

// sweep drops the records whose budget window has ended at now, and the
// blocks that have ended.
func (r *restStore) sweep(now int64) {
	for i := range r.s {
		sh := &r.s[i]
		sh.mu.Lock()
		for h, rec := range sh.m {
			if rec.expired(now) {
				delete(sh.m, h)
				r.n.Add(-1)
			}
		}
		for h, b := range sh.blocks {
			if b.until <= now {
				delete(sh.blocks, h)
				r.nb.Add(-1)
			}
		}
		sh.mu.Unlock()
	}
}

// expired reports whether rec's window has ended at now.
func (rec restSpend) expired(now int64) bool {
	idx, _ := PeriodWindow(now, rec.code, rec.period)
	return idx != rec.period
}

// spend adds usd to rec in the window of period code holding now, from 0
// when that is a new one (localTeam.spendLocked at rest).
func (rec restSpend) spend(now, code int64, usd float64) restSpend {
	start := int64(0)
	if rec.code == code {
		start = rec.period
	}
	idx, _ := PeriodWindow(now, code, start)
	if rec.code != code || rec.period != idx {
		rec = restSpend{period: idx, code: code}
	}
	rec.spent += usd
	return rec
}
