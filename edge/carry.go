package edge

// What the local fallback admitted while Redis was unreachable, carried
// into Redis by the team's next admission scripts once it answers again
// (SPEC 3, 9: shared or local, never both): the key and user levels whose
// local TATs Redis has not heard of, and the max_parallel slots of the
// requests still running. And what Redis admitted for this node's requests
// still running, which the fallback counts once Redis is gone: their slots
// (sharedSlots) and their budget reservations (sharedSpend).

import (
	"math"
	"sync/atomic"
	"time"

	"switchyard/catalog"
)

// unsharedLevels are the key and user levels whose fallback admissions
// Redis has not heard of, by their keys' base: each level's own next
// admission script carries the fallback's TATs, whichever call of the team
// reaches Redis first. Guarded by the team's mu.
type unsharedLevels struct {
	// until is when each level's local TATs are surely past (Unix ns):
	// then there is nothing left to carry
	until map[string]int64
	// pruneAt is when the past entries are next dropped (Unix ns)
	pruneAt int64
}

// markUnsharedSub records that the local fallback admitted a request at
// the level whose keys start with base, and that its local TATs are past
// by until (Unix ns). Bounded by maxLevels: when full, the entries whose
// TATs are past are dropped first, and a level past the bound is not
// carried (the fallback's own share of it is then admitted again).
func (ts *teamState) markUnsharedSub(base string, now, until int64) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	u := ts.unsharedSubs.Load()
	if u == nil {
		u = &unsharedLevels{until: map[string]int64{}}
		ts.unsharedSubs.Store(u)
	}
	if now > 0 {
		u.prune(now)
	}
	if _, ok := u.until[base]; !ok && len(u.until) >= maxLevels {
		for k, t := range u.until {
			if t <= now {
				delete(u.until, k)
			}
		}
		if len(u.until) >= maxLevels {
			return
		}
	}
	u.until[base] = max(u.until[base], until)
}

// takeUnsharedSub reports whether the level whose keys start with base has
// local admissions Redis has not heard of whose TATs are not past at now
// (Unix ns), and forgets them: the caller carries them. Without any, it
// costs one atomic load.
func (ts *teamState) takeUnsharedSub(base string, now int64) bool {
	if ts.unsharedSubs.Load() == nil {
		return false
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	u := ts.unsharedSubs.Load()
	if u == nil {
		return false
	}
	until, ok := u.until[base]
	if ok {
		delete(u.until, base)
	}
	u.prune(now)
	if len(u.until) == 0 {
		ts.unsharedSubs.Store(nil) // the team's admissions stop taking the lock
	}
	return ok && until > now
}

// unsharedPrune spaces the walks that drop unsharedLevels' past entries.
const unsharedPrune = 10 * time.Second

// prune drops the entries whose local TATs are past at now, at most once
// per unsharedPrune: after an outage, the levels the fallback admitted
// and that are not admitted again carry nothing after a minute, but kept
// the team's record of them, so every admission of the team took its
// lock, and held their memory until the team's map was full.
func (u *unsharedLevels) prune(now int64) {
	if now < u.pruneAt {
		return
	}
	u.pruneAt = now + int64(unsharedPrune)
	for k, t := range u.until {
		if t <= now {
			delete(u.until, k)
		}
	}
}

// sharedSlots is how many slots this node's running requests hold in Redis
// that the local fallback does not count itself: at the team level, and at
// the key or user levels whose keys start with bases[j] ("" = none). The
// fallback's own slots carried into Redis (slotCarried) are held there too,
// and counted once, by the fallback.
func (ts *teamState) sharedSlots(bases [2]string) (team int, subs [2]int) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	team = len(ts.live)
	for j, b := range bases {
		if ls := ts.subs[b]; b != "" && ls != nil {
			subs[j] = len(ls.live)
		}
	}
	for _, s := range ts.localSlots {
		if s.state != slotCarried {
			continue
		}
		if s.team {
			team--
		}
		for k := range s.nsub {
			for j, b := range bases {
				if b != "" && s.subs[k].keys.base == b {
					subs[j]--
				}
			}
		}
	}
	return team, subs
}

// heldSpend is what a team's requests that this node runs reserved in
// Redis against the budgets: team at the team level, subs at the key and
// user levels by their keys' base, in nano-USD (nanoUSD: integer sums
// return to exactly 0 once every request ended). A team's record holds
// one only once it has a budget (teamState.held).
type heldSpend struct {
	team atomic.Int64 // read and written without the lock: Begin and Finish of every request
	// Guarded by the team's mu; bounded by the requests running and by
	// maxLevels.
	subs map[string]int64
}

// none reports whether h holds nothing (h may be nil; the team's mu held).
func (h *heldSpend) none() bool { return h == nil || (h.team.Load() == 0 && len(h.subs) == 0) }

// heldOf is ts's heldSpend, made if new.
func (ts *teamState) heldOf() *heldSpend {
	if h := ts.held.Load(); h != nil {
		return h
	}
	ts.held.CompareAndSwap(nil, new(heldSpend))
	return ts.held.Load()
}

// sharedSpend is what this node's running requests reserved in Redis
// against the budgets the local fallback does not count itself, in USD:
// at the team level, and at the key or user levels whose keys start with
// bases[j] ("" = none). Their real cost comes to the fallback's spend when
// they end (Finish: Local.Spend).
func (ts *teamState) sharedSpend(bases [2]string) (team float64, subs [2]float64) {
	h := ts.held.Load()
	if h == nil {
		return 0, subs
	}
	team = usdOf(h.team.Load())
	if bases == [2]string{} {
		return team, subs
	}
	ts.mu.Lock()
	for j, b := range bases {
		if b != "" {
			subs[j] = usdOf(h.subs[b])
		}
	}
	ts.mu.Unlock()
	return team, subs
}

// holdSubUSDLocked adds n nano-USD reserved in Redis by a request that
// runs to the level whose keys start with base, and reports whether it
// did: a level past maxLevels is not counted (ts.mu held).
func (ts *teamState) holdSubUSDLocked(base string, n int64) bool {
	if n <= 0 {
		return false
	}
	h := ts.heldOf()
	if h.subs == nil {
		h.subs = map[string]int64{}
	}
	v, ok := h.subs[base]
	if !ok && len(h.subs) >= maxLevels {
		return false
	}
	h.subs[base] = v + n
	return true
}

// unholdSubUSDLocked takes back what holdSubUSDLocked added for a request
// that ended (ts.mu held).
func (ts *teamState) unholdSubUSDLocked(base string, n int64) {
	h := ts.held.Load()
	if h == nil {
		return
	}
	if v := h.subs[base] - n; v > 0 {
		h.subs[base] = v
	} else {
		delete(h.subs, base)
	}
}

// maxHeldUSD bounds one reservation as nanoUSD counts it (a billion USD):
// far past any budget, and the sums stay within int64.
const maxHeldUSD = 1e9

// nanoUSD is usd in whole nano-USD, the unit of the held sums: integers,
// so adding and taking back one request's reservation returns a sum to
// exactly what it was.
func nanoUSD(usd float64) int64 { return int64(math.Round(min(max(0, usd), maxHeldUSD) * 1e9)) }

// usdOf is nano-USD n in USD.
func usdOf(n int64) float64 { return float64(max(0, n)) / 1e9 }

// localSlot is a slot the local fallback gave a request that still runs,
// at the levels (team, key, user) with max_parallel, on its way into Redis.
type localSlot struct {
	team  bool
	subs  [2]subSlot
	nsub  int
	state uint8 // slotPending, slotSent or slotCarried
	ended bool  // its request ended while an admission script carried it
	maybe bool  // a script that carried it failed in an unknown state: it may be in Redis
}

// subSlot is a key or user level of a localSlot.
type subSlot struct {
	lv   Level
	keys levelKeys
}

// The states of a localSlot.
const (
	slotPending = iota // not in Redis: the next admission script carries it
	slotSent           // in an admission script not answered yet
	slotCarried        // in Redis: renewed by the writer, released by Finish
)

// slotAdd is one slot an admission script adds to a set: the set's key and
// the slot's id.
type slotAdd struct{ key, id string }

// addLocalSlot records the slot id of a request the local fallback
// admitted (ts.mu not held).
func (ts *teamState) addLocalSlot(id string, s *localSlot) {
	ts.mu.Lock()
	if ts.localSlots == nil {
		ts.localSlots = map[string]*localSlot{}
	}
	if _, ok := ts.localSlots[id]; !ok {
		ts.localSlots[id] = s
		ts.nLocalSlots.Add(1)
	}
	ts.mu.Unlock()
}

// takeLocalSlots appends to adds the sets and ids of the local slots not
// yet in Redis, marks them sent, and returns their ids in sent.
func (ts *teamState) takeLocalSlots(adds []slotAdd, sent []string) ([]slotAdd, []string) {
	if ts.nLocalSlots.Load() == 0 {
		return adds, sent
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	for id, s := range ts.localSlots {
		if s.state != slotPending {
			continue
		}
		if len(sent) == maxBatchItems {
			break // the rest go with the next call
		}
		s.state = slotSent
		ts.nLocalSlots.Add(-1)
		sent = append(sent, id)
		if s.team {
			adds = append(adds, slotAdd{ts.keys.par(), id})
		}
		for j := range s.nsub {
			adds = append(adds, slotAdd{s.subs[j].keys.par, id})
		}
	}
	return adds, sent
}

// settleLocalSlots records the outcome of the admission script that
// carried the slots sent: in Redis they are held (the writer renews them)
// until Finish releases them; after a failure they are sent again. A slot
// whose request ended meanwhile is released in Redis at once (the failed
// script may have added it too).
func (ts *teamState) settleLocalSlots(r *Redis, t *catalog.Team, sent []string, ok bool) {
	if len(sent) == 0 {
		return
	}
	var rel []finishWrite
	ts.mu.Lock()
	for _, id := range sent {
		s := ts.localSlots[id]
		if s == nil || s.state != slotSent {
			continue
		}
		switch {
		case s.ended:
			delete(ts.localSlots, id)
			rel = append(rel, s.release(id))
		case ok:
			s.state = slotCarried
			ts.holdLocked(id, s.team, s.subs[:s.nsub])
		default:
			s.state, s.maybe = slotPending, true
			ts.nLocalSlots.Add(1)
		}
	}
	ts.mu.Unlock()
	for i := range rel {
		if visit, urgent := ts.add(t, &rel[i], r.w, r.cfg.MaxPins); visit {
			r.w.markDirty(ts, urgent)
		}
	}
}

// endLocalSlot is Finish's part for a local slot id: what to write to
// Redis (ok false: nothing, it is not there, or the script carrying it
// releases it when it settles).
func (ts *teamState) endLocalSlot(id string) (w finishWrite, ok bool) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	s := ts.localSlots[id]
	if s == nil {
		return w, false
	}
	switch s.state {
	case slotPending:
		delete(ts.localSlots, id)
		ts.nLocalSlots.Add(-1)
		if s.maybe { // a failed script may have added it
			return s.release(id), true
		}
		return w, false
	case slotSent:
		s.ended = true
		return w, false
	}
	delete(ts.localSlots, id)
	return s.release(id), true
}

// release is the write that frees slot id at every level of s.
func (s *localSlot) release(id string) finishWrite {
	w := finishWrite{}
	if s.team {
		w.slot = id
	}
	for j := range s.nsub {
		w.subs[j] = subWrite{lv: s.subs[j].lv, keys: s.subs[j].keys, slot: id}
	}
	w.nsub = s.nsub
	return w
}
