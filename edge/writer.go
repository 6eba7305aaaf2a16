package edge

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"switchyard/ratelimit"
	"switchyard/telemetry"
)

// Writer bounds and rhythm.
const (
	defaultFlushEvery  = 10 * time.Millisecond  // what others' admissions need goes out at least this often
	lazyEvery          = 100 * time.Millisecond // what they do not need (lazy) waits at most this long
	lazyBatch          = 64                     // or until this many teams or audit entries wait
	defaultUsageEvery  = 10 * time.Second       // a team's usage report waits at most this long
	defaultMaxPins     = 100_000                // pending pin writes, all teams together
	defaultMaxAudit    = 10_000                 // audit entries queued for the stream
	maxRefunds         = 256                    // refund pairs per team per batch; more are merged
	maxReleases        = 10_000                 // pending slot releases per team; beyond, the lease frees them
	maxBatchItems      = 1_000                  // releases, renewals or pins per script call (Lua unpack limit)
	maxBatchRows       = 256                    // usage-by-level rows per team per script call
	maxAuditPerFlush   = 1_024                  // XADDs per pipeline
	maxTeamsPerCall    = 512                    // teams per finishLua call on one shard
	markTTL            = 24 * time.Hour         // life of a node's applied-batch mark
	usageTTL           = 40 * 24 * time.Hour    // life of a team's usage hash after its last write
	usageRefresh       = 24 * time.Hour         // how often a busy team's usage TTL is renewed
	retryMin, retryMax = 50 * time.Millisecond, time.Second
)

// dueUsage is the part of take that decides whether ts's usage rows (per
// deployment and by level) go in
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
func (w *writer) dueUsage(ts *teamState, now time.Time) bool {
	if !ts.hasUsage() || w.draining {
		return ts.hasUsage()
	}
	if ts.usageDue == 0 {
		ts.usageDue = now.Add(w.usageEvery).UnixNano()
	}
	if now.UnixNano() >= ts.usageDue || ts.rowPressure() {
		return true
	}
	if !ts.usageHeld {
		ts.usageHeld = true
		w.held = append(w.held, heldUsage{ts: ts, due: ts.usageDue})
	}
	return false
}

// heldUsage is a team whose usage rows wait until due.
type heldUsage struct {
	ts  *teamState
	due int64 // Unix ns
}

// releaseHeld queues for this round the teams of w.held whose usage is due
// (all of them when draining), and drops them from it.
func (w *writer) releaseHeld(now time.Time) {
	i := w.heldHead
	for ; i < len(w.held) && (w.draining || now.UnixNano() >= w.held[i].due); i++ {
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

// appendTo adds b's part of a finishLua call: its keys and arguments.
func (b *batch) appendTo(keys []string, args []any) ([]string, []any) {
	tk := &b.ts.keys
	k0 := len(keys)
	fk := tk.finish()
	keys = append(keys, fk[:]...)
	t := b.team
	args = append(args, 0, 0) // this part's argument and key counts, filled in below
	a0 := len(args)
	args = append(args, len(b.pins), b.usageTTL, len(b.subs))
	team := levelBatch{pendingWrites: b.pendingWrites, renew: b.renew}
	tl := t.Team.Level()
	team.lv.Limits = &tl
	args = team.args(args)
	args = append(args, len(b.usage))
	for _, u := range b.usage {
		args = append(args, u.dep, u.req, u.tok, u.usd)
	}
	keys, args = b.appendRows(keys, args)
	for k, p := range b.pins {
		keys = append(keys, tk.base()+k)
		args = append(args, p.value, p.ttl.Milliseconds(), p.mode)
	}
	keys, args = appendLeases(keys, args, b.leases)
	for i := range b.subs {
		lb := &b.subs[i]
		keys = append(keys, lb.keys.tat, lb.keys.bud, lb.keys.par)
		args = lb.args(args)
	}
	args[a0-2], args[a0-1] = len(args)-a0, len(keys)-k0
	return keys, args
}

// appendRows adds the usage-by-level rows of b (SPEC 3.1): one key per
// UTC day (the team's hash of that day, before the pin keys) and, in the
// arguments, the number of days, then per day its expiry (unix s), its
// number of rows and per row the field prefix and the seven sums in
// usageMetrics order.
func (b *batch) appendRows(keys []string, args []any) ([]string, []any) {
	if len(b.byLevel) == 0 {
		return keys, append(args, 0)
	}
	days := map[int32][]rowKey{}
	for k := range b.byLevel {
		days[k.day] = append(days[k.day], k)
	}
	args = append(args, len(days))
	for d, ks := range days {
		keys = append(keys, b.ts.keys.base()+dayKey+dayString(d))
		args = append(args, dayExpireAt(d), len(ks))
		for _, k := range ks {
			s := b.byLevel[k]
			args = append(args, rowField(k), s.Requests, s.InputTokens, s.CachedTokens, s.OutputTokens, s.CostUSD, s.CachedRequests, s.SavedUSD)
		}
	}
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
func newFinishCall(mark string, seq int64, lease any, channel string, batches []*batch) *finishCall {
	nk, na := 1, 5
	for _, b := range batches {
		nk += 4 + len(b.pins) + len(b.leases) + 3*len(b.subs)
		na += 15 + 2*len(b.refunds) + len(b.releases) + len(b.renew) + 4*len(b.usage) + 3*len(b.pins) + 3*len(b.leases) + 1 + 10*len(b.byLevel)
		for i := range b.subs {
			lb := &b.subs[i]
			na += 8 + 2*len(lb.refunds) + len(lb.releases) + len(lb.renew)
		}
	}
	keys := make([]string, 1, nk)
	keys[0] = mark
	args := make([]any, 0, na)
	args = append(args, seq, markTTL.Milliseconds(), lease, channel, len(batches))
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

	// prompt is set when a write another node's next request looks for is
	// pending (a slot release, a pin, a cache entry, a lease end; rhythm.go):
	// the next tick sends. lazySince is when the oldest lazy write still
	// waiting was queued (unix ns; 0: none): the settlements of reservations
	// and audit entries, sent within lazyEvery, or sooner once lazyBatch wait.
	prompt    atomic.Bool
	lazySince atomic.Int64

	rowCount atomic.Int64 // usage-by-level rows pending, all teams (maxNodeRows)
	// levels counts the key and user level records of all teams and their
	// parts of batches in flight (levelState, levelBatch); maxLevels bounds
	// it (maxNodeLevels; tests lower it).
	levels    atomic.Int64
	maxLevels int64
	rowFolded atomic.Int64 // rows folded into OtherUser since start

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
	failed     bool // the last round failed: every tick tries again (after retryAt)
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
		maxLevels: maxNodeLevels,
		flushTTL:  max(4*r.cfg.Timeout, 250*time.Millisecond),
		auditQ:    make(chan *telemetry.Entry, r.cfg.MaxAudit),
		wake:      make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
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
		w.stampLazy()
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

func (w *writer) run() {
	w.started.Store(true)
	defer close(w.done)
	_ = beginScript.Load(context.Background(), w.r.c).Err() // preload: the first admissions run one EVALSHA
	_ = gcraScript.Load(context.Background(), w.r.c).Err()
	_ = readScript.Load(context.Background(), w.r.c).Err() // a team without limits taking a coalescing lease
	tick := time.NewTicker(w.every)
	defer tick.Stop()
	for {
		now := time.Time{}
		select {
		case <-w.wake:
		case <-tick.C:
			if now = w.r.cfg.Clock(); !w.due(now) {
				continue
			}
		case <-w.stop:
			return
		}
		if now.IsZero() {
			now = w.r.cfg.Clock()
		}
		w.step(context.Background(), now)
	}
}

// step is one round of the writer at now: everything pending goes out in
// one pipeline, unless an earlier failure asks to wait until retryAt. It
// reports whether the round succeeded.
func (w *writer) step(ctx context.Context, now time.Time) bool {
	if now.Before(w.retryAt) {
		return false
	}
	// what is queued from here on flags the next round (this one may or
	// may not take it)
	w.prompt.Store(false)
	w.lazySince.Store(0)
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
		w.r.teams.Range(func(_ string, ts *teamState) {
			ts.mu.Lock()
			add := ts.hasLive() && !ts.dirty
			ts.dirty = ts.dirty || add
			ts.mu.Unlock()
			if add {
				dirty = append(dirty, ts)
			}
		})
	}
	var calls []*finishCall
	switch {
	case !w.r.cfg.OneShard:
		for _, ts := range dirty {
			if b := ts.take(&w.seq, now, renew, w); b != nil {
				calls = append(calls, newFinishCall(ts.keys.mark(), b.seq, w.r.lease, w.r.channel, []*batch{b}))
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
			w.inflight = newFinishCall(w.mark, w.seq, w.r.lease, w.r.channel, batches)
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
	w.failed = !ok
	if ok {
		w.backoff = 0
	} else {
		w.backoff = min(max(2*w.backoff, retryMin), retryMax)
		w.retryAt = now.Add(w.backoff)
	}
	if len(entries) == maxAuditPerFlush && len(w.auditQ) > 0 { // more than a round's worth: drain now
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
	rerunNoScript(ctx, w.r.c, cmds, func(i int) (*redis.Script, []string, []any) { return finishScript, calls[i].keys, calls[i].args })
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
			rest := v[j+1:]
			for a := 0; a+1 < len(rest); a += 2 {
				n, _ := rest[a].(int64)
				lv, _ := rest[a+1].(int64)
				if n < 1 || int(n) > len(c.batches) {
					continue
				}
				b := c.batches[n-1]
				if lv == 0 {
					w.r.budgetAlert(b.team.Name, LevelTeam, "")
				} else if int(lv) <= len(b.subs) {
					l := &b.subs[lv-1].lv
					w.r.budgetAlert(b.team.Name, l.Kind, l.Name)
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
	w.r.teams.Range(func(_ string, ts *teamState) {
		if ts.pending() {
			n++
		}
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
	w.r.teams.Range(func(_ string, ts *teamState) {
		empty = empty && !ts.pending()
	})
	return empty
}
