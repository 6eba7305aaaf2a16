package routing

import (
	"hash/maphash"
	"sync/atomic"
)

// RoundRobin picks the next candidate in turn, per node (SPEC 5
// `round_robin`), with one rotation per candidate set: requests whose
// candidates differ (a tools request that only some deployments serve, a
// retry that excludes the deployment it tried, a pool with one deployment
// cooling down) each turn over their own set. One counter shared by
// different sets skewed the rotation: with plain requests on {A, B, C}
// alternating with tools requests on {A, B}, every tools request drew an
// even turn and went to A.
//
// The rotations live in a fixed table (rrSlots entries, 24 KiB), so memory
// stays bounded whatever the number of sets; a set whose window of the table
// is full takes over the least recently used entry of it, keeping its turn
// count (a new set starts wherever it lands, then rotates evenly). Select
// takes no lock. The zero value is ready to use; Router.Reconfigure hands
// the table to the new router, so a config reload does not send the next
// request of every set back to its first candidate.
type RoundRobin struct {
	turns [rrSlots]rrTurn
}

const (
	rrSlots  = 1 << 10 // candidate sets tracked per node; a power of two
	rrWindow = 4       // entries a set may occupy, from its hash's home entry on
)

// rrTurn is the rotation of one candidate set.
type rrTurn struct {
	set  atomic.Uint64 // the set's key (candidateSetKey); 0 = free
	next atomic.Uint64 // turns taken
	used atomic.Int64  // tick of the last turn: the entry a full window gives up
}

// Select implements Selector.
func (r *RoundRobin) Select(p *Pick) int {
	n := r.turn(candidateSetKey(p.Candidates), p.tick).next.Add(1) - 1
	return int(n % uint64(len(p.Candidates)))
}

// turn returns the rotation of the set with key k, claiming a free entry of
// its window, or the least recently used one when the window is full.
func (r *RoundRobin) turn(k uint64, now int64) *rrTurn {
	home := int(k)
	var victim *rrTurn
	for i := range rrWindow {
		t := &r.turns[(home+i)&(rrSlots-1)]
		s := t.set.Load()
		if s == 0 && !t.set.CompareAndSwap(0, k) {
			s = t.set.Load() // another set claimed it first
		} else if s == 0 {
			s = k
		}
		if s == k {
			t.used.Store(now)
			return t
		}
		if victim == nil || t.used.Load() < victim.used.Load() {
			victim = t
		}
	}
	// Racing takeovers of one entry only share its counter for a turn.
	victim.set.Store(k)
	victim.used.Store(now)
	return victim
}

// tracked counts the candidate sets holding an entry (tests).
func (r *RoundRobin) tracked() int {
	n := 0
	for i := range r.turns {
		if r.turns[i].set.Load() != 0 {
			n++
		}
	}
	return n
}

// candidateSetKey is a non-zero 64-bit key of the candidates' deployment
// ids in order, from the hash each state keeps. The order of a pool's
// candidates is the pool's, so one set has one key.
func candidateSetKey(cands []Candidate) uint64 {
	h := uint64(len(cands))
	for i := range cands {
		h = (h ^ cands[i].State.key) * 0x100000001b3
	}
	// murmur3's finalizer: every key bit reaches the low bits that pick
	// the entry
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	if h == 0 {
		h = 1 // 0 marks a free entry
	}
	return h
}

// idKey is a deployment id's 64-bit hash, kept by its state
// (DeploymentState.key) so a selection hashes no string.
func idKey(id string) uint64 { return maphash.String(idSeed, id) }

// idSeed seeds idKey: the keys only name sets within this process.
var idSeed = maphash.MakeSeed()

var _ Selector = (*RoundRobin)(nil)
