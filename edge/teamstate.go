package edge

// A team's record in the Redis edge state: the writes its finished
// requests leave for the writer (charges, bounded refunds, budget spend,
// slot releases and renewals, usage rows, coalesced pins and cache
// entries), folded in by Finish and taken out in batches by the writer.

import (
	"sync"
	"sync/atomic"
	"time"

	"switchyard/catalog"
	"switchyard/ratelimit"
)

// teamState is one team's pending post-response writes on this node. The
// request path (Begin, Finish) and the writer take mu only to fold in or
// swap out a few fields, never while talking to Redis (SPEC 9).
type teamState struct {
	keys  teamKeys          // immutable (its boxed limits swap atomically)
	owner *Redis            // immutable: the edge whose record this is
	local ratelimit.TeamRef // immutable: the team in the local fallback (learn mirrors into it)

	mu sync.Mutex
	// Guarded by mu.
	team *catalog.Team // latest limits seen (TPM converts tokens to time)
	pendingWrites
	live    map[string]struct{}
	usage   []depUsage // by deployment, a few: a slice of values, one object a team
	byLevel rowSet     // usage by level not yet sent (SPEC 3.1), bounded: rowLocked
	// row1 is the first pending usage row, kept inline (has1): most teams
	// have one row a flush, and a map of one held 600 bytes a team for
	// usage_every (6 MB with 10,000 teams)
	row1  rowKey
	sums1 UsageSums
	has1  bool
	// the flags together, packed in one word (a record of 448 B or less
	// stays in its size class, TestTeamStateBytes)
	dirty     bool                 // queued in writer.dirty
	usageHeld bool                 // on writer.held until usageDue
	pins      map[string]pinWrite  // coalesced per key: the last write wins
	leases    map[string]leaseHold // coalescing leases held, by full name (lease.go)
	leaseOps  []leaseOp            // lease ends not yet sent
	flight    *batch               // sent and not acknowledged; resent as is
	usageExp  int64                // when the usage hash's TTL is next renewed (Unix ns: a time.Time holds a pointer)
	usageDue  int64                // when the usage pending is written (Unix ns; 0: not yet held)
	// subs are the team's key and user levels with writes pending or
	// slots live (levels.go), by their keys' base; subLive counts their
	// live slots and subDirty says one has writes not yet taken.
	subs     map[string]*levelState
	subLive  int
	subDirty bool

	// unshared is set when the local fallback admitted a request of this
	// team that Redis has not heard of: the team's next admission script
	// carries the local TATs, so Redis never admits on top of it.
	unshared atomic.Bool
	// unsharedSubs is unshared for the key and user levels: made by the
	// fallback's first admission of such a level, nil again once none is
	// left to carry, read without the lock by every admission (unsharedLevels).
	unsharedSubs atomic.Pointer[unsharedLevels]
	// localSlots are the max_parallel slots of the requests the local
	// fallback admitted that are still running, by their id in Redis
	// (localSlot): the team's next admission script puts them in Redis, so
	// its sets count them once it is back (SPEC 3, 9); nLocalSlots counts
	// those not yet sent, read without the lock by every admission.
	// Guarded by mu; bounded by the requests running.
	localSlots  map[string]*localSlot
	nLocalSlots atomic.Int64
	// held is what this node's requests admitted in Redis and still
	// running reserved against the budgets there (heldSpend), made by the
	// team's first such request: the local fallback counts it against its
	// share of each budget (sharedSpend).
	held atomic.Pointer[heldSpend]

	// comb batches this team's admissions on Redis Cluster (Redis.admit),
	// made with the record there; on one shard the node's combiner batches
	// every team's, and this is nil.
	comb *combiner
}

// refund is one reservation's unused tokens and the end of that
// reservation on the TPM timeline (Redis µs): the script returns at most
// end - now of it.
type refund struct {
	tokens int64
	end    int64
}

// usageRow is what one (team, deployment) served and has not yet been
// written: sums, so it stays exact however long Redis is gone.
type usageRow struct {
	req, tok int64
	usd      float64
}

// depUsage is a deployment's pending usage row. A team's rows are a slice
// of these values, not a map of pointers: with 10,000 teams serving, a map
// and a row object a deployment were three objects a team, about 33,000
// for the collector to mark on every cycle.
type depUsage struct {
	dep string
	usageRow
}

// addUsage folds one served request of deployment dep into rows.
func addUsage(rows []depUsage, dep string, tokens int64, cost float64) []depUsage {
	i := 0
	for i < len(rows) && rows[i].dep != dep {
		i++
	}
	if i == len(rows) {
		if rows == nil {
			rows = make([]depUsage, 0, 2) // most teams are served by one or two deployments a flush
		}
		rows = append(rows, depUsage{dep: dep})
	}
	u := &rows[i]
	u.req++
	u.tok += tokens
	u.usd += cost
	return rows
}

// pinWrite is a pending pin: value, TTL and mode (0 set, 1 keep a higher
// tier, 2 delete, 3 set a response-cache entry, which replaces its lease:
// finishLua keeps the value it replaced for the lease's end).
type pinWrite struct {
	value string
	ttl   time.Duration
	mode  int
	cache bool // a response-cache entry: its bytes count in writer.cacheBytes
}

// maxPendingCacheBytes bounds the response-cache entries the writer holds
// for Redis (SPEC 9: its memory is bounded); past it an entry is not
// shared (the node's own store keeps it) and counted as dropped.
const maxPendingCacheBytes = 32 << 20

func newTeamState(prefix, team, node string) *teamState {
	ts := &teamState{} // live is made by the first slot: most teams have no max_parallel
	ts.keys.init(prefix, team, node)
	return ts
}

// finishWrite is what one Finish adds to its team's pending writes.
type finishWrite struct {
	slot  string  // release
	delta int64   // actual - reserved tokens
	end   int64   // the reservation's end (bounds a refund)
	usd   float64 // the real cost minus the budget reservation (< 0: a refund)
	// settled is the team's budget reservation this finish settles in
	// Redis (subWrite.settled)
	settled float64
	spent   bool   // the request spent at the team's budget: check its alert
	dep0    string // the deployment that served ("" = none)
	// usage of dep0
	tokens int64
	cost   float64
	// usage by level (SPEC 3.1): the row and its sums (lvOK false = none)
	lvRow  rowKey
	lvSums UsageSums
	lvOK   bool
	// pins ("" key = none)
	tierKey, tier, depKey, dep string
	tierTTL, depTTL            time.Duration
	// a response-cache entry ("" key = none)
	cacheKey, cacheVal string
	cacheTTL           time.Duration
	// the end of a coalescing lease this request held ("" key = none)
	lease leaseOp
	// the key and user levels' writes, the first nsub
	subs [2]subWrite
	nsub int
}

// add folds w in. It reports whether the writer has to visit the team
// (visit: the team has writes to send now, unsent(false)) and whether a
// slot release was queued (urgent: the writer sends those at once, so
// other nodes see the slot free soon too). A write that is only a usage
// row of a team whose rows already wait in the writer's held list
// (usageHeld) needs no visit: the held list brings the team back when its
// rows are due. With 10,000 teams nearly every request is the
// only one of its team in a flush, and the visit (a lock and a batch of a
// team state no longer in cache) was the writer's largest cost per request.
func (ts *teamState) add(t *catalog.Team, w *finishWrite, wr *writer, maxPins int) (visit, urgent bool) {
	dropped, relDropped, levelsDropped := 0, 0, 0
	ts.mu.Lock()
	ts.team = t
	if w.slot != "" {
		delete(ts.live, w.slot)
		urgent = true
	}
	if ts.fold(w.slot, w.delta, w.end, w.usd, w.settled, w.spent) {
		relDropped++
	}
	for j := range w.nsub {
		sw := &w.subs[j]
		if sw.held != 0 {
			ts.unholdSubUSDLocked(sw.keys.base, sw.held)
		}
		ls := ts.subs[sw.keys.base]
		if ls == nil {
			if sw.slot == "" && sw.delta == 0 && sw.usd == 0 && sw.settled == 0 && !sw.spent {
				// nothing to send (a reservation that matched the use): a
				// level made for it would never be visited, and idle levels
				// filled maxLevels until real writes were dropped
				continue
			}
			if len(ts.subs) >= maxLevels || wr.levels.Load() >= wr.maxLevels {
				levelsDropped++
				continue
			}
			ls = ts.newLevelLocked(sw.keys)
		}
		ls.lv = sw.lv
		if sw.slot != "" {
			if _, ok := ls.live[sw.slot]; ok {
				delete(ls.live, sw.slot)
				ts.subLive--
			}
			urgent = true
		}
		if ls.fold(sw.slot, sw.delta, sw.end, sw.usd, sw.settled, sw.spent) {
			relDropped++
		}
		ts.subDirty = ts.subDirty || ls.pending()
	}
	if w.dep0 != "" {
		ts.usage = addUsage(ts.usage, w.dep0, w.tokens, w.cost)
	}
	folded := w.lvOK && ts.rowLocked(w, wr)
	if w.tierKey != "" {
		mode := 0
		if w.tier == "easy" {
			mode = 1 // escalate-only: an easy pin never overwrites a hard one another replica wrote (SPEC 4)
		}
		dropped += ts.pinLocked(w.tierKey, pinWrite{value: w.tier, ttl: w.tierTTL, mode: mode}, wr, maxPins)
	}
	if w.depKey != "" {
		dropped += ts.pinLocked(w.depKey, pinWrite{value: w.dep, ttl: w.depTTL}, wr, maxPins)
	}
	cacheDropped := 0
	if w.cacheKey != "" {
		cacheDropped = ts.pinLocked(w.cacheKey, pinWrite{value: w.cacheVal, ttl: w.cacheTTL, mode: 3, cache: true}, wr, maxPins)
		dropped += cacheDropped
	}
	if w.lease.key != "" {
		u, d := ts.endLeaseLocked(w.lease, cacheDropped == 0)
		urgent = urgent || u
		if d {
			relDropped++
		}
	}
	visit = ts.unsent(false)
	ts.mu.Unlock()
	if dropped > 0 {
		wr.r.obs.OnDropped("pins", dropped)
	}
	if relDropped > 0 {
		wr.r.obs.OnDropped("releases", relDropped)
	}
	if levelsDropped > 0 {
		wr.r.obs.OnDropped("levels", levelsDropped)
	}
	if folded {
		wr.rowFolded.Add(1)
		wr.r.obs.OnDropped("usage_folded", 1)
	}
	return visit, urgent
}

// rowLocked folds w's usage row into the team's pending rows, bounded
// per team (maxTeamRows) and per node (maxNodeRows, wr.rowCount); it
// reports whether the row's user (or key) was folded into OtherUser.
func (ts *teamState) rowLocked(w *finishWrite, wr *writer) bool {
	switch {
	case !ts.has1:
		ts.row1, ts.sums1, ts.has1 = w.lvRow, w.lvSums, true
		wr.rowCount.Add(1)
		return false
	case ts.row1 == w.lvRow:
		ts.sums1.Add(&w.lvSums)
		return false
	}
	if ts.byLevel == nil {
		ts.byLevel = rowSet{}
	}
	made, folded := ts.byLevel.addBeside(w.lvRow, &w.lvSums, wr.rowCount.Load() >= maxNodeRows, 1)
	wr.rowCount.Add(int64(made))
	return folded
}

// hasUsage reports whether ts holds usage rows of either kind (ts.mu held).
func (ts *teamState) hasUsage() bool { return len(ts.usage) > 0 || ts.has1 || len(ts.byLevel) > 0 }

// takeRowsLocked moves at most maxBatchRows of the pending level rows
// into a batch's map (ts.mu held).
func (ts *teamState) takeRowsLocked(wr *writer) rowSet {
	if ts.has1 {
		if ts.byLevel == nil {
			ts.byLevel = make(rowSet, 1)
		}
		if s := ts.byLevel[ts.row1]; s != nil { // folded rows may have met it
			s.Add(&ts.sums1)
			wr.rowCount.Add(-1)
		} else {
			c := ts.sums1
			ts.byLevel[ts.row1] = &c
		}
		ts.has1, ts.row1, ts.sums1 = false, rowKey{}, UsageSums{}
	}
	l := ts.byLevel
	if len(l) > maxBatchRows {
		l = make(rowSet, maxBatchRows)
		for k, s := range ts.byLevel {
			if len(l) == maxBatchRows {
				break
			}
			l[k] = s
			delete(ts.byLevel, k)
		}
	} else {
		ts.byLevel = nil
	}
	wr.rowCount.Add(-int64(len(l)))
	return l
}

func (ts *teamState) pinLocked(key string, p pinWrite, wr *writer, maxPins int) int {
	if p.ttl <= 0 {
		p.mode = 2
	}
	if ts.pins == nil {
		ts.pins = map[string]pinWrite{}
	}
	old, ok := ts.pins[key]
	if !ok {
		if wr.pinCount.Load() >= int64(maxPins) {
			return 1 // bounded: the local store still has it
		}
		wr.pinCount.Add(1)
	}
	if p.cache {
		if wr.cacheBytes.Load()+int64(len(p.value)) > maxPendingCacheBytes {
			if !ok {
				wr.pinCount.Add(-1)
			}
			return 1 // bounded: the node's own store keeps the entry
		}
		wr.cacheBytes.Add(int64(len(p.value)))
	}
	if ok && old.cache {
		wr.cacheBytes.Add(-int64(len(old.value)))
	}
	ts.pins[key] = p
	return 0
}

// ownPins fills pins this node wrote and Redis may not have yet (read your
// own writes) and returns the names still to read, compacted in place.
func (ts *teamState) ownPins(names *[5]string, slots *[5]int, n int, out *Pins) int {
	if n == 0 {
		return 0
	}
	ts.mu.Lock()
	if len(ts.pins) == 0 && ts.flight == nil {
		ts.mu.Unlock()
		return n
	}
	k := 0
	for i := range n {
		p, ok := ts.pins[names[i]]
		if !ok && ts.flight != nil {
			p, ok = ts.flight.pins[names[i]]
		}
		if ok {
			if p.mode != 2 {
				out.set(slots[i], p.value)
			}
			continue
		}
		names[k], slots[k] = names[i], slots[i]
		k++
	}
	ts.mu.Unlock()
	return k
}

// hold registers the slot of tk this node holds in Redis, at each level
// holding it: the writer renews its lease while the request runs; and
// what tk reserved against the budgets of its key and user levels
// (holdSubUSDLocked).
func (ts *teamState) hold(t *catalog.Team, tk *ticket) {
	ts.mu.Lock()
	ts.team = t
	if tk.teamSlot && tk.slot != "" {
		if ts.live == nil {
			ts.live = map[string]struct{}{}
		}
		ts.live[tk.slot] = struct{}{}
	}
	for j := range tk.nsub {
		st := &tk.subs[j]
		if st.usd > 0 {
			st.held = ts.holdSubUSDLocked(st.keys.base, nanoUSD(st.usd))
		}
		if !st.slot || tk.slot == "" {
			continue
		}
		ls := ts.subs[st.keys.base]
		if ls == nil { // not bounded by maxLevels: live slots are bounded by the requests running
			ls = ts.newLevelLocked(st.keys)
		}
		ls.lv = st.lv
		if ls.live == nil {
			ls.live = map[string]struct{}{}
		}
		if _, ok := ls.live[tk.slot]; !ok {
			ls.live[tk.slot] = struct{}{}
			ts.subLive++
		}
	}
	ts.mu.Unlock()
}

// holdLocked registers slot id at the team level (team) and at the key and
// user levels subs (ts.mu held): the writer renews its lease.
func (ts *teamState) holdLocked(id string, team bool, subs []subSlot) {
	if team {
		if ts.live == nil {
			ts.live = map[string]struct{}{}
		}
		ts.live[id] = struct{}{}
	}
	for j := range subs {
		ls := ts.subs[subs[j].keys.base]
		if ls == nil {
			ls = ts.newLevelLocked(subs[j].keys)
		}
		ls.lv = subs[j].lv
		if ls.live == nil {
			ls.live = map[string]struct{}{}
		}
		if _, ok := ls.live[id]; !ok {
			ls.live[id] = struct{}{}
			ts.subLive++
		}
	}
}

// newLevelLocked adds the record of the level named by keys (ts.mu held).
func (ts *teamState) newLevelLocked(keys levelKeys) *levelState {
	if ts.subs == nil {
		ts.subs = map[string]*levelState{}
	}
	ls := &levelState{keys: keys}
	ts.subs[keys.base] = ls
	ts.countLevels(1)
	return ls
}

// dropLevelLocked forgets the record of the level whose keys start with
// base (ts.mu held).
func (ts *teamState) dropLevelLocked(base string) {
	delete(ts.subs, base)
	ts.countLevels(-1)
}

// countLevels adds n to the node's count of level records (writer.levels).
func (ts *teamState) countLevels(n int) {
	if ts.owner != nil && n != 0 {
		ts.owner.w.levels.Add(int64(n))
	}
}

// unhold forgets tk's slot at every level: Release freed it in Redis.
func (ts *teamState) unhold(tk *ticket) {
	ts.mu.Lock()
	delete(ts.live, tk.slot)
	for j := range tk.nsub {
		if ls := ts.subs[tk.subs[j].keys.base]; ls != nil {
			if _, ok := ls.live[tk.slot]; ok {
				delete(ls.live, tk.slot)
				ts.subLive--
			}
			if len(ls.live) == 0 && !ls.pending() {
				ts.dropLevelLocked(tk.subs[j].keys.base)
			}
		}
	}
	ts.mu.Unlock()
}

// hasLive reports whether ts holds live slots at any level, or coalescing
// leases: what the writer renews (ts.mu held).
func (ts *teamState) hasLive() bool { return len(ts.live) > 0 || ts.subLive > 0 || len(ts.leases) > 0 }

// batch is one script call: an immutable snapshot of a team's writes.
type batch struct {
	ts   *teamState
	team *catalog.Team
	seq  int64
	pendingWrites
	renew    []string
	usage    []depUsage
	byLevel  rowSet
	usageTTL int64 // seconds; negative when the renewal is not due
	pins     map[string]pinWrite
	leases   []leaseOp    // coalescing lease renewals and ends
	subs     []levelBatch // the key and user levels' parts
}

// take snapshots the team's pending writes into a batch (nil when there is
// nothing to send). A team with a batch in flight resends that batch.
// renew adds the slots this node holds, to extend their leases.
func (ts *teamState) take(seq *int64, now time.Time, renew bool, wr *writer) *batch {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.dirty = false
	if ts.flight != nil {
		return ts.flight
	}
	b := &batch{ts: ts, team: ts.team, pendingWrites: ts.pendingWrites.take()}
	b.usageTTL = -int64(usageTTL.Seconds())
	if wr.dueUsage(ts, now) {
		b.usage, b.byLevel = ts.usage, ts.takeRowsLocked(wr)
		if len(b.usage) > 0 && now.UnixNano() >= ts.usageExp {
			b.usageTTL, ts.usageExp = -b.usageTTL, now.Add(usageRefresh).UnixNano() // one EXPIRE a day, not one per flush
		}
		ts.usage = nil
		if len(ts.byLevel) == 0 && !ts.has1 { // rows left over go in the next batch, not after another wait
			ts.usageDue = 0
		}
	}
	if len(ts.pins) <= maxBatchItems {
		b.pins, ts.pins = ts.pins, nil
	} else {
		b.pins = make(map[string]pinWrite, maxBatchItems)
		for k, p := range ts.pins {
			if len(b.pins) == maxBatchItems {
				break
			}
			b.pins[k] = p
			delete(ts.pins, k)
		}
	}
	wr.pinCount.Add(-int64(len(b.pins)))
	for _, p := range b.pins {
		if p.cache {
			wr.cacheBytes.Add(-int64(len(p.value)))
		}
	}
	b.leases = ts.takeLeasesLocked(now, renew, wr.r.cfg.SlotLease)
	if renew && len(ts.live) > 0 {
		// every live slot, however many: one left out would lose its lease
		// while its request runs and let another request take its place
		// (the script renews them one ZADD at a time, so their number is not
		// bounded by Lua's stack as the releases' unpack is)
		b.renew = make([]string, 0, len(ts.live))
		for id := range ts.live {
			b.renew = append(b.renew, id)
		}
	}
	if ts.subDirty || (renew && ts.subLive > 0) {
		for k, ls := range ts.subs {
			if lb := ls.take(renew); !lb.empty() {
				b.subs = append(b.subs, lb)
			}
			if len(ls.live) == 0 && !ls.pending() {
				ts.dropLevelLocked(k) // at rest: nothing of it stays on the node
			}
			if len(b.subs) == maxBatchItems {
				break // the rest goes in the next batch
			}
		}
		ts.subDirty = false
		for _, ls := range ts.subs {
			if ls.pending() {
				ts.subDirty = true
				break
			}
		}
	}
	if b.team == nil || (!b.pending() &&
		len(b.renew) == 0 && len(b.usage) == 0 && len(b.byLevel) == 0 && len(b.pins) == 0 && len(b.leases) == 0 && len(b.subs) == 0) {
		return nil
	}
	*seq++
	b.seq = *seq
	ts.flight = b
	ts.countLevels(len(b.subs)) // held until acknowledged (settle)
	return b
}

// settle records the outcome of a batch: acknowledged, or kept to be resent.
func (ts *teamState) settle(b *batch, err error) (again bool) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.flight != b {
		return false
	}
	if err == nil {
		ts.flight = nil
		ts.countLevels(-len(b.subs))
		return ts.unsent(false)
	}
	return true
}

// pending reports whether ts has writes for Redis, sent or not.
func (ts *teamState) pending() bool {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.pendingLocked()
}

func (ts *teamState) pendingLocked() bool { return ts.flight != nil || ts.unsent(true) }

// idle reports whether ts has nothing for the writer: nothing pending, not
// queued for a flush nor on the held list, no live slot.
func (ts *teamState) idle() bool {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return !ts.pendingLocked() && !ts.dirty && !ts.usageHeld && !ts.hasLive() && len(ts.localSlots) == 0 &&
		ts.held.Load().none()
}

// unsent reports whether ts has writes not yet taken into a batch (ts.mu
// held); usage on w.held counts only with held.
func (ts *teamState) unsent(held bool) bool {
	return ts.pendingWrites.pending() ||
		(ts.hasUsage() && (held || !ts.usageHeld || ts.rowPressure())) || len(ts.pins) > 0 || len(ts.leaseOps) > 0 || ts.subDirty
}
