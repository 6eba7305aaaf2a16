package edge

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"switchyard/catalog"
	"switchyard/ratelimit"
	"switchyard/telemetry"
)

// Writer bounds and rhythm.
const (
	defaultFlushEvery  = 10 * time.Millisecond // what is pending goes out at least this often
	defaultUsageEvery  = 10 * time.Second      // a team's usage report waits at most this long
	defaultMaxPins     = 100_000               // pending pin writes, all teams together
	defaultMaxAudit    = 10_000                // audit entries queued for the stream
	maxRefunds         = 256                   // refund pairs per team per batch; more are merged
	maxReleases        = 10_000                // pending slot releases per team; beyond, the lease frees them
	maxBatchItems      = 1_000                 // releases, renewals or pins per script call (Lua unpack limit)
	maxAuditPerFlush   = 1_024                 // XADDs per pipeline
	maxTeamsPerCall    = 512                   // teams per finishLua call on one shard
	markTTL            = 24 * time.Hour        // life of a node's applied-batch mark
	usageTTL           = 40 * 24 * time.Hour   // life of a team's usage hash after its last write
	usageRefresh       = 24 * time.Hour        // how often a busy team's usage TTL is renewed
	retryMin, retryMax = 50 * time.Millisecond, time.Second
)

// teamState is one team's pending post-response writes on this node. The
// request path (Begin, Finish) and the writer take mu only to fold in or
// swap out a few fields, never while talking to Redis (SPEC 9).
type teamState struct {
	keys  *teamKeys         // immutable
	owner *Redis            // immutable: the edge whose record this is
	local ratelimit.TeamRef // immutable: the team in the local fallback (learn mirrors into it)

	mu sync.Mutex
	// Guarded by mu.
	team      *catalog.Team // latest limits seen (TPM converts tokens to time)
	charge    int64         // tokens to add to the TPM TAT
	refunds   []refund      // bounded refunds not yet sent
	usd       float64       // budget spend not yet sent
	releases  []string      // slot ids to remove
	live      map[string]struct{}
	usage     map[string]*usageRow
	pins      map[string]pinWrite // coalesced per key: the last write wins
	flight    *batch              // sent and not acknowledged; resent as is
	dirty     bool                // queued in writer.dirty
	usageExp  time.Time           // when the usage hash's TTL is next renewed
	usageDue  time.Time           // when the usage pending is written (zero: not yet held)
	usageHeld bool                // on writer.held until usageDue

	// unshared is set when the local fallback admitted a request of this
	// team that Redis has not heard of: the team's next admission script
	// carries the local TATs, so Redis never admits on top of it.
	unshared atomic.Bool

	// comb batches this team's admissions on Redis Cluster (Redis.admit);
	// on one shard the node's combiner batches every team's.
	comb combiner
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

// pinWrite is a pending pin: value, TTL and mode (0 set, 1 keep a higher
// tier, 2 delete).
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

func newTeamState(k *teamKeys) *teamState {
	return &teamState{keys: k} // live is made by the first slot: most teams have no max_parallel
}

// finishWrite is what one Finish adds to its team's pending writes.
type finishWrite struct {
	slot  string  // release
	delta int64   // actual - reserved tokens
	end   int64   // the reservation's end (bounds a refund)
	usd   float64 // the real cost minus the budget reservation (< 0: a refund)
	dep0  string  // the deployment that served ("" = none)
	// usage of dep0
	tokens int64
	cost   float64
	// pins ("" key = none)
	tierKey, tier, depKey, dep string
	tierTTL, depTTL            time.Duration
	// a response-cache entry ("" key = none)
	cacheKey, cacheVal string
	cacheTTL           time.Duration
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
	dropped, relDropped := 0, 0
	ts.mu.Lock()
	ts.team = t
	if w.slot != "" {
		delete(ts.live, w.slot)
		if len(ts.releases) >= maxReleases {
			ts.releases = ts.releases[1:] // the oldest: its lease runs out first
			relDropped++
		}
		ts.releases = append(ts.releases, w.slot)
		urgent = true
	}
	if w.delta > 0 {
		ts.charge += w.delta
	} else if w.delta < 0 {
		if len(ts.refunds) >= maxRefunds {
			// merged into the newest: the sum, bounded by the earlier end, so
			// the merge never returns capacity that one of its reservations
			// no longer holds (a tighter bound: it may return less, never more)
			last := &ts.refunds[len(ts.refunds)-1]
			last.tokens += -w.delta
			last.end = min(last.end, w.end)
		} else {
			ts.refunds = append(ts.refunds, refund{tokens: -w.delta, end: w.end})
		}
	}
	ts.usd += w.usd
	if w.dep0 != "" {
		if ts.usage == nil {
			ts.usage = map[string]*usageRow{}
		}
		u := ts.usage[w.dep0]
		if u == nil {
			u = &usageRow{}
			ts.usage[w.dep0] = u
		}
		u.req++
		u.tok += w.tokens
		u.usd += w.cost
	}
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
	if w.cacheKey != "" {
		dropped += ts.pinLocked(w.cacheKey, pinWrite{value: w.cacheVal, ttl: w.cacheTTL, cache: true}, wr, maxPins)
	}
	visit = ts.unsent(false)
	ts.mu.Unlock()
	if dropped > 0 {
		wr.r.obs.OnDropped("pins", dropped)
	}
	if relDropped > 0 {
		wr.r.obs.OnDropped("releases", relDropped)
	}
	return visit, urgent
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

// takeReleases hands this node's pending releases of the team to Begin, so
// they travel inside the next admission script, together with the releases
// of the writer's batch in flight (it may reach Redis after this admission;
// ZREM twice is harmless). It returns how many of them were taken from the
// pending list (the rest stay with the batch).
func (ts *teamState) takeReleases() (rel []string, taken int) {
	ts.mu.Lock()
	rel = ts.releases
	if len(rel) > maxBatchItems {
		rel = rel[:maxBatchItems:maxBatchItems]
		ts.releases = ts.releases[maxBatchItems:]
	} else {
		ts.releases = nil
	}
	taken = len(rel)
	if ts.flight != nil && len(ts.flight.releases) > 0 && taken < maxBatchItems {
		rel = append(rel[:taken:taken], ts.flight.releases[:min(len(ts.flight.releases), maxBatchItems-taken)]...)
	}
	ts.mu.Unlock()
	return rel, taken
}

// putBackReleases returns releases whose admission script failed.
func (ts *teamState) putBackReleases(rel []string) {
	if len(rel) == 0 {
		return
	}
	ts.mu.Lock()
	ts.releases = append(rel, ts.releases...)
	ts.mu.Unlock()
}

// hold registers a slot this node holds in Redis: the writer renews its
// lease while the request runs.
func (ts *teamState) hold(t *catalog.Team, slot string) {
	ts.mu.Lock()
	ts.team = t
	if ts.live == nil {
		ts.live = map[string]struct{}{}
	}
	ts.live[slot] = struct{}{}
	ts.mu.Unlock()
}

// batch is one script call: an immutable snapshot of a team's writes.
type batch struct {
	ts       *teamState
	team     *catalog.Team
	seq      int64
	charge   int64
	refunds  []refund
	usd      float64
	releases []string
	renew    []string
	usage    map[string]*usageRow
	usageTTL int64 // seconds; negative when the renewal is not due
	pins     map[string]pinWrite
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
	b := &batch{ts: ts, team: ts.team, charge: ts.charge, refunds: ts.refunds, usd: ts.usd, usage: wr.dueUsage(ts, now)}
	b.usageTTL = -int64(usageTTL.Seconds())
	if len(b.usage) > 0 {
		if !now.Before(ts.usageExp) {
			b.usageTTL, ts.usageExp = -b.usageTTL, now.Add(usageRefresh) // one EXPIRE a day, not one per flush
		}
		ts.usage, ts.usageDue = nil, time.Time{}
	}
	ts.charge, ts.refunds, ts.usd = 0, nil, 0
	if n := len(ts.releases); n > maxBatchItems {
		b.releases = ts.releases[:maxBatchItems:maxBatchItems]
		ts.releases = ts.releases[maxBatchItems:]
	} else {
		b.releases, ts.releases = ts.releases, nil
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
	if b.team == nil || (b.charge == 0 && len(b.refunds) == 0 && b.usd == 0 && len(b.releases) == 0 &&
		len(b.renew) == 0 && len(b.usage) == 0 && len(b.pins) == 0) {
		return nil
	}
	*seq++
	b.seq = *seq
	ts.flight = b
	return b
}

// dueUsage is the part of take that decides whether ts's usage rows go in
// this batch (ts.mu held): only once they have waited usageEvery, or when
// the writer drains. Usage is a report (SPEC 11: no admission reads it), so
// a team serving a request now and then costs Redis one usage write per
// usageEvery instead of one per request: with 10,000 teams, most flushes
// carry a team's one request, and its usage was the larger part of the
// finish script's work. Limits, budget spend, releases and pins are not
// held. Rows held wait on w.held, in the order their wait began, which
// brings the team back when they are due; they stay exact through any
// outage, as before, and a killed node loses at most usageEvery of them
// (its audit stream and log lines still hold every request).
func (w *writer) dueUsage(ts *teamState, now time.Time) map[string]*usageRow {
	if len(ts.usage) == 0 || w.draining {
		return ts.usage
	}
	if ts.usageDue.IsZero() {
		ts.usageDue = now.Add(w.usageEvery)
	}
	if !now.Before(ts.usageDue) {
		return ts.usage
	}
	if !ts.usageHeld {
		ts.usageHeld = true
		w.held = append(w.held, heldUsage{ts: ts, due: ts.usageDue})
	}
	return nil
}

// heldUsage is a team whose usage rows wait until due.
type heldUsage struct {
	ts  *teamState
	due time.Time
}

// releaseHeld queues for this round the teams of w.held whose usage is due
// (all of them when draining), and drops them from it.
func (w *writer) releaseHeld(now time.Time) {
	i := w.heldHead
	for ; i < len(w.held) && (w.draining || !now.Before(w.held[i].due)); i++ {
		ts := w.held[i].ts
		w.held[i] = heldUsage{}
		ts.mu.Lock()
		ts.usageHeld = false
		ts.mu.Unlock()
		w.markDirty(ts, false)
	}
	w.heldHead = i
	if w.heldHead == len(w.held) {
		w.held, w.heldHead = w.held[:0], 0
	} else if w.heldHead > len(w.held)/2 {
		n := copy(w.held, w.held[w.heldHead:])
		clear(w.held[n:])
		w.held, w.heldHead = w.held[:n], 0
	}
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
		return ts.unsent(false)
	}
	return true
}

// appendTo adds b's part of a finishLua call: its keys and arguments.
func (b *batch) appendTo(keys []string, args []any) ([]string, []any) {
	tk := b.ts.keys
	k0 := len(keys)
	keys = append(keys, tk.finish[:]...)
	t := b.team
	args = append(args, 0, 0) // this part's argument and key counts, filled in below
	a0 := len(args)
	args = append(args, len(b.pins), max(0, t.TPM), b.charge, b.usd, ratelimit.PeriodCode(ratelimit.BudgetPeriod(t)), b.usageTTL, ratelimit.BudgetAlertUSD(t))
	args = append(args, len(b.refunds))
	for _, r := range b.refunds {
		args = append(args, r.tokens, r.end)
	}
	args = append(args, len(b.releases))
	for _, id := range b.releases {
		args = append(args, id)
	}
	args = append(args, len(b.renew))
	for _, id := range b.renew {
		args = append(args, id)
	}
	args = append(args, len(b.usage))
	for dep, u := range b.usage {
		args = append(args, dep, u.req, u.tok, u.usd)
	}
	for k, p := range b.pins {
		keys = append(keys, tk.base+k)
		args = append(args, p.value, p.ttl.Milliseconds(), p.mode)
	}
	args[a0-2], args[a0-1] = len(args)-a0, len(keys)-k0
	return keys, args
}

// finishCall is one finishLua call: the batches it carries (one team's on
// Cluster, every team's of a flush on one shard), built once, so a resend is
// the same call.
type finishCall struct {
	keys    []string
	args    []any
	batches []*batch
}

// newFinishCall builds the call applying batches under mark with seq.
func newFinishCall(mark string, seq int64, lease any, batches []*batch) *finishCall {
	nk, na := 1, 4
	for _, b := range batches {
		nk += 4 + len(b.pins)
		na += 13 + 2*len(b.refunds) + len(b.releases) + len(b.renew) + 4*len(b.usage) + 3*len(b.pins)
	}
	keys := make([]string, 1, nk)
	keys[0] = mark
	args := make([]any, 0, na)
	args = append(args, seq, markTTL.Milliseconds(), lease, len(batches))
	for _, b := range batches {
		keys, args = b.appendTo(keys, args)
	}
	return &finishCall{keys: keys, args: args, batches: batches}
}

// writer is the node's one background writer (SPEC 9): it sends the teams'
// pending writes (one finishLua call per team per flush), the audit entries
// (XADD to the bounded stream), the slot lease renewals and the deployment
// usage counts. Its memory is bounded: sums per team and (team, deployment),
// pins coalesced per key up to MaxPins, audit entries up to MaxAudit (more
// are dropped from the stream and counted; the structured log has them all).
type writer struct {
	// Immutable after construction.
	r        *Redis
	store    *telemetry.RedisAudit // nil: no stream
	usage    *ratelimit.RedisUsage // nil: none
	every    time.Duration
	flushTTL time.Duration
	auditQ   chan *telemetry.Entry
	wake     chan struct{} // capacity 1
	stop     chan struct{}
	done     chan struct{}
	once     sync.Once
	started  atomic.Bool

	pinCount   atomic.Int64
	cacheBytes atomic.Int64 // response-cache entries pending (maxPendingCacheBytes)

	dmu   sync.Mutex
	dirty []*teamState // guarded by dmu; teams with pending writes

	// The writer goroutine's own (no lock).
	seq        int64
	mark       string      // the node's applied-call mark (one shard)
	inflight   *finishCall // one shard: the call sent and not acknowledged
	nextRenew  time.Time
	nextUsage  time.Time
	retryAt    time.Time
	backoff    time.Duration
	auditRetry []*telemetry.Entry
	usageEvery time.Duration
	held       []heldUsage // teams whose usage waits (dueUsage), from heldHead on
	heldHead   int
	draining   bool // close: everything goes out, held usage included
}

func newWriter(r *Redis, store *telemetry.RedisAudit, usage *ratelimit.RedisUsage) *writer {
	every := r.cfg.FlushEvery
	if every <= 0 {
		every = defaultFlushEvery
	}
	if r.cfg.MaxPins <= 0 {
		r.cfg.MaxPins = defaultMaxPins
	}
	usageEvery := r.cfg.UsageEvery
	if usageEvery <= 0 {
		usageEvery = defaultUsageEvery
	}
	if r.cfg.MaxAudit <= 0 {
		r.cfg.MaxAudit = defaultMaxAudit
	}
	return &writer{
		r: r, store: store, usage: usage, every: every, usageEvery: usageEvery, mark: nodeMarkKey(r.cfg.Prefix, r.node),
		flushTTL: max(4*r.cfg.Timeout, 250*time.Millisecond),
		auditQ:   make(chan *telemetry.Entry, r.cfg.MaxAudit),
		wake:     make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
	}
}

// audit queues e for the stream, or drops and counts it when the queue is
// full (never blocks).
func (w *writer) audit(e *telemetry.Entry) {
	if w.store == nil {
		return
	}
	select {
	case w.auditQ <- e:
	default:
		w.r.obs.OnDropped("audit", 1)
	}
}

// requeue puts teams that are still dirty back for the next round, which it
// asks for at once.
func (w *writer) requeue(teams []*teamState) {
	if len(teams) == 0 {
		return
	}
	w.dmu.Lock()
	w.dirty = append(w.dirty, teams...)
	w.dmu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// markDirty queues ts for the next flush; urgent wakes the writer now.
func (w *writer) markDirty(ts *teamState, urgent bool) {
	ts.mu.Lock()
	queued := ts.dirty
	ts.dirty = true
	ts.mu.Unlock()
	if !queued {
		w.dmu.Lock()
		w.dirty = append(w.dirty, ts)
		w.dmu.Unlock()
	}
	if urgent {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

func (w *writer) run() {
	w.started.Store(true)
	defer close(w.done)
	_ = beginScript.Load(context.Background(), w.r.c).Err() // preload: the first admissions run one EVALSHA
	tick := time.NewTicker(w.every)
	defer tick.Stop()
	for {
		select {
		case <-w.wake:
		case <-tick.C:
		case <-w.stop:
			return
		}
		w.step(context.Background(), w.r.cfg.Clock())
	}
}

// step is one round of the writer at now: everything pending goes out in
// one pipeline, unless an earlier failure asks to wait until retryAt. It
// reports whether the round succeeded.
func (w *writer) step(ctx context.Context, now time.Time) bool {
	if now.Before(w.retryAt) {
		return false
	}
	w.releaseHeld(now)
	renew := !now.Before(w.nextRenew)
	if renew {
		w.nextRenew = now.Add(w.r.cfg.SlotLease / 3)
	}
	w.dmu.Lock()
	dirty := w.dirty
	w.dirty = nil
	w.dmu.Unlock()
	if renew {
		w.r.teams.Range(func(_, v any) bool {
			ts := v.(*teamState)
			ts.mu.Lock()
			add := len(ts.live) > 0 && !ts.dirty
			ts.dirty = ts.dirty || add
			ts.mu.Unlock()
			if add {
				dirty = append(dirty, ts)
			}
			return true
		})
	}
	var calls []*finishCall
	switch {
	case !w.r.cfg.OneShard:
		for _, ts := range dirty {
			if b := ts.take(&w.seq, now, renew, w); b != nil {
				calls = append(calls, newFinishCall(ts.keys.mark, b.seq, w.r.lease, []*batch{b}))
			}
		}
	case w.inflight != nil:
		// a call under the node's mark is resent as it was before anything
		// else is sent under it (the mark keeps only the highest seq)
		w.requeue(dirty)
		calls = append(calls, w.inflight)
	default:
		var batches []*batch
		for i, ts := range dirty {
			if len(batches) == maxTeamsPerCall {
				w.requeue(dirty[i:])
				break
			}
			if b := ts.take(&w.seq, now, renew, w); b != nil {
				batches = append(batches, b)
			}
		}
		if len(batches) > 0 {
			w.seq++
			w.inflight = newFinishCall(w.mark, w.seq, w.r.lease, batches)
			calls = append(calls, w.inflight)
		}
	}
	entries := w.auditRetry
	w.auditRetry = nil
	for len(entries) < maxAuditPerFlush {
		select {
		case e := <-w.auditQ:
			entries = append(entries, e)
			continue
		default:
		}
		break
	}
	ok := true
	if len(calls) > 0 || len(entries) > 0 {
		ok = w.send(ctx, calls, entries)
	}
	if w.usage != nil && !now.Before(w.nextUsage) {
		w.nextUsage = now.Add(ratelimit.DefaultUsageInterval)
		cctx, cancel := context.WithTimeout(ctx, w.flushTTL)
		w.usage.Step(cctx)
		cancel()
	}
	if ok {
		w.backoff = 0
	} else {
		w.backoff = min(max(2*w.backoff, retryMin), retryMax)
		w.retryAt = now.Add(w.backoff)
	}
	if len(w.auditQ) > 0 {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
	return ok
}

// send writes one round in one pipeline and settles each part.
func (w *writer) send(ctx context.Context, calls []*finishCall, entries []*telemetry.Entry) bool {
	ctx, cancel := context.WithTimeout(ctx, w.flushTTL)
	defer cancel()
	cmds := make([]*redis.Cmd, len(calls))
	var auditCmds []redis.Cmder
	_, _ = w.r.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, c := range calls {
			cmds[i] = finishScript.EvalSha(ctx, p, c.keys, c.args...)
		}
		if len(entries) > 0 && w.store != nil {
			auditCmds = w.store.Queue(ctx, p, entries)
		}
		return nil
	})
	rerunNoScript(ctx, w.r.c, finishScript, cmds, func(i int) ([]string, []any) { return calls[i].keys, calls[i].args })
	ok := true
	for i, c := range calls {
		err := cmds[i].Err()
		if err != nil {
			ok = false
		} else {
			if c == w.inflight {
				w.inflight = nil
			}
			w.rejected(c, cmds[i].Val())
		}
		for _, b := range c.batches {
			if b.ts.settle(b, err) {
				w.markDirty(b.ts, false)
			}
		}
	}
	for _, c := range auditCmds {
		if c.Err() != nil {
			ok = false
			// kept for the next round, within the bound; the rest is dropped
			room := w.r.cfg.MaxAudit - len(w.auditQ)
			keep := entries
			if len(keep) > room {
				w.r.obs.OnDropped("audit", len(keep)-max(0, room))
				keep = keep[:max(0, room)]
			}
			w.auditRetry = keep
			break
		}
	}
	return ok
}

// rejected reports the teams whose part of an applied call Redis rejected
// (finishLua's {1, team, error, ...}): each is logged and counted, and its
// batch is settled like the others, since sending it again would fail
// again; the other teams of the call were applied (SPEC 14).
func (w *writer) rejected(c *finishCall, reply any) {
	v, ok := reply.([]any)
	if !ok {
		return // 0: the call had been applied already
	}
	for j, x := range v {
		if s, _ := x.(string); s == "alerts" {
			for _, a := range v[j+1:] {
				if n, _ := a.(int64); n >= 1 && int(n) <= len(c.batches) {
					w.r.budgetAlert(c.batches[n-1].team.Name)
				}
			}
			v = v[:j]
			break
		}
	}
	for j := 1; j+1 < len(v); j += 2 {
		n, _ := v[j].(int64)
		if n < 1 || int(n) > len(c.batches) {
			continue
		}
		msg, _ := v[j+1].(string)
		w.r.obs.OnWriteError(c.batches[n-1].team.Name, msg)
	}
}

// closeRounds is how many failed rounds in a row close makes before it
// gives up on Redis: a node stopping while Redis is unreachable exits after
// a few flush timeouts (flushTTL each, at most), not after its whole
// shutdown budget (SPEC 9: a dead peer costs at most its timeout).
const closeRounds = 3

// close stops the goroutine and sends what is pending, until ctx ends or
// closeRounds rounds in a row have failed; what is still unsent then is
// lost, counted (audit) and named in the error.
func (w *writer) close(ctx context.Context) error {
	w.once.Do(func() { close(w.stop) })
	if w.started.Load() {
		<-w.done
	}
	w.draining = true
	failed := 0
	for {
		w.retryAt = time.Time{}
		w.nextRenew = w.r.cfg.Clock().Add(time.Hour) // no renewals at shutdown: the node is going away
		ok := w.step(ctx, w.r.cfg.Clock())
		if ok && w.empty() {
			if w.usage != nil {
				return w.usage.Close(ctx)
			}
			return nil
		}
		if ok {
			failed = 0
		} else {
			failed++
		}
		if ctx.Err() != nil || failed == closeRounds {
			audit := len(w.auditQ) + len(w.auditRetry)
			w.r.obs.OnDropped("audit", audit)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("edge: Redis failed %d flushes in a row at shutdown: the pending writes of %d teams (usage, spend, corrections, pins) and %d audit entries are lost", failed, w.pendingTeams(), audit)
		}
		t := time.NewTimer(retryMin)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
}

// pendingTeams is how many teams still have writes for Redis.
func (w *writer) pendingTeams() int {
	n := 0
	w.r.teams.Range(func(_, v any) bool {
		if ts := v.(*teamState); ts.pending() {
			n++
		}
		return true
	})
	return n
}

// empty reports whether nothing is pending.
func (w *writer) empty() bool {
	if len(w.auditQ) > 0 || len(w.auditRetry) > 0 {
		return false
	}
	w.dmu.Lock()
	n := len(w.dirty)
	w.dmu.Unlock()
	if n > 0 {
		return false
	}
	empty := true
	w.r.teams.Range(func(_, v any) bool {
		empty = !v.(*teamState).pending()
		return empty
	})
	return empty
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
	return !ts.pendingLocked() && !ts.dirty && !ts.usageHeld && len(ts.live) == 0
}

// unsent reports whether ts has writes not yet taken into a batch (ts.mu
// held); usage on w.held counts only with held.
func (ts *teamState) unsent(held bool) bool {
	return ts.charge != 0 || len(ts.refunds) > 0 || ts.usd != 0 || len(ts.releases) > 0 ||
		(len(ts.usage) > 0 && (held || !ts.usageHeld)) || len(ts.pins) > 0
}
