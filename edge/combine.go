package edge

// The group commit of admissions (SPEC 16: one team's concurrent
// admissions may share one script call): admissions queue behind the call
// in flight, the next batch is packed into beginLua calls (one per team on
// Cluster, up to teamsPerCall teams on one shard), and each admission gets
// its part of the answer, or the local fallback's decision when the call
// failed.

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"switchyard/catalog"
	"switchyard/ratelimit"
)

// admitCall is one admission waiting to be decided in Redis, alone or in a
// batch with the other admissions that arrived meanwhile.
type admitCall struct {
	ts    *teamState
	q     *Request
	cost  int64
	usd   float64 // reserved against the budget (0 without one)
	slot  string
	subs  [2]subCall // its key and user levels with limits, the first nsub
	nsub  int
	pins  []string      // full pin keys to read
	lease *leaseReq     // the coalescing lease to take or find (nil: none)
	until time.Time     // arrival + redis.timeout: the latest its answer may come
	done  chan struct{} // capacity 1: the result is in, or this call leads the next batch
	lead  bool
	batch []*admitCall // to run when lead
	res   []any        // beginLua's values for this admission (when err is nil)
	err   error
	// d is Redis's answer decoded from res, or, when err is set, the local
	// fallback's decision, taken by settleCall before the next batch is
	// built (localErr is the fallback's error)
	d        ratelimit.Decision
	localErr error
}

// beginLua returns per admission beginHead values, then levelResults per
// level (the team first), then the pins it read.
const (
	beginHead    = 4
	levelResults = 6
)

// pinsAt is the index of c's first pin value in its results.
func (c *admitCall) pinsAt() int { return beginHead + levelResults*(1+c.nsub) }

// results is how many values beginLua returns for c: with a lease, its
// role follows the pins.
func (c *admitCall) results() int {
	if c.lease != nil {
		return c.pinsAt() + len(c.pins) + 1
	}
	return c.pinsAt() + len(c.pins)
}

// levelAt is the index of level j's values (0 the team) in c's results.
func levelAt(j int) int { return beginHead + levelResults*j }

// decision decodes one admission's values of beginLua: the verdict, the
// level that binds, and for the headers, per dimension, the level with
// the least remaining (SPEC 3.1).
func decision(c *admitCall) ratelimit.Decision {
	num := func(i int) int64 { return resInt(c.res, i) }
	d := ratelimit.Decision{Allowed: num(0) == 1}
	if !d.Allowed {
		k := num(1)
		if k <= 0 || k >= int64(len(ratelimit.Kinds)) {
			k = 1
		}
		d.Kind, d.RetryAfter = ratelimit.Kinds[k], micros(num(2))
		if j := int(num(3)); j >= 1 && j <= c.nsub {
			d.Level = int(c.subs[j-1].lv.Kind)
		}
	}
	t := c.q.Team
	header(&d, t.RPM, t.TPM, levelAt(0), num)
	for j := range c.nsub {
		l := c.subs[j].lv.Limits
		header(&d, l.RPM, l.TPM, levelAt(1+j), num)
	}
	return d
}

// header puts a level's values (from index at) into d's headers where it
// has less remaining than the levels before it.
func header(d *ratelimit.Decision, rpm, tpm int64, at int, num func(int) int64) {
	if rpm > 0 && (d.LimitRequests == 0 || num(at) < d.RemainingRequests) {
		d.LimitRequests, d.RemainingRequests, d.ResetRequests = rpm, num(at), micros(num(at+1))
	}
	if tpm > 0 && (d.LimitTokens == 0 || num(at+2) < d.RemainingTokens) {
		d.LimitTokens, d.RemainingTokens, d.ResetTokens = tpm, num(at+2), micros(num(at+3))
	}
}

// combiner batches admissions (group commit): mu guards busy (a call is in
// flight) and queue (admissions waiting for the next batch).
type combiner struct {
	mu    sync.Mutex
	busy  bool
	queue []*admitCall
}

// combinerFor is the combiner ac joins: the node's on one shard (every
// team's admissions share a round trip), the team's own on Cluster.
func (r *Redis) combinerFor(ac *admitCall) *combiner {
	if r.cfg.OneShard {
		return &r.comb
	}
	return ac.ts.comb
}

// admit decides ac in Redis. Concurrent admissions share one round trip
// (group commit): the first runs at once; those that arrive while a call is
// in flight queue up, and the next batch is sent as soon as the call
// returns, by the first of them. A batch goes in one script call for all
// its teams on one shard (a pipeline of calls past teamsPerCall teams), in
// one call per team on Cluster. A burst far larger than the connection pool
// therefore costs a few round trips, not a pool wait each, and is decided
// exactly in Redis; and 10,000 teams cost what one does. No goroutine is
// started; one at a time nothing waits.
//
// Every admission's answer is due redis.timeout after it arrived (SPEC 9),
// queue included: a batch is sent with the earliest deadline of its
// admissions, and not at all when less than a quarter of the timeout is
// left (the call could not be answered in time, and a timeout it provoked
// would count against Redis in the breaker). The admissions of a batch
// that was not sent or failed are decided locally, in settleCall, by a
// fallback that has learnt every earlier answer; and what it admits travels
// to Redis in the team's next call. A queued admission has no timer of its
// own: giving up while the call in flight may be admitting in Redis would
// let the fallback decide before it has learnt that call's answer.
func (r *Redis) admit(ctx context.Context, ac *admitCall) ([]any, error) {
	cb := r.combinerFor(ac)
	cb.mu.Lock()
	if !cb.busy {
		cb.busy = true
		cb.mu.Unlock()
		r.lead(ctx, cb, ac, []*admitCall{ac})
		return ac.res, ac.err
	}
	ac.done = make(chan struct{}, 1)
	cb.queue = append(cb.queue, ac)
	cb.mu.Unlock()
	<-ac.done // bounded by the call in flight's deadline, then this one's
	if ac.lead {
		r.lead(ctx, cb, ac, ac.batch)
	}
	return ac.res, ac.err
}

// lead sends batch (leader is in it), then hands the combiner's next batch
// to its first member, or marks the combiner idle. The leader does not
// send the next batch itself: its own request would wait for others'.
func (r *Redis) lead(ctx context.Context, cb *combiner, leader *admitCall, batch []*admitCall) {
	r.runBatch(ctx, leader, batch)
	cb.mu.Lock()
	next := cb.queue
	cb.queue = nil
	cb.busy = len(next) > 0
	cb.mu.Unlock()
	if len(next) > 0 {
		next[0].lead, next[0].batch = true, next
		next[0].done <- struct{}{}
	}
}

// teamBatch is the admissions of one team in a batch: its part of a script call.
type teamBatch struct {
	calls       []*admitCall
	rel         []string       // releases it carries
	taken       int            // how many of rel came from the pending list
	lrel        []levelRelease // its key and user levels' releases it carries
	carried     bool           // it carries the local fallback's TATs (ts.unshared)
	subsCarried []string       // the levels whose local TATs it carries (ts.unsharedSubs)
	adds        []slotAdd      // the local fallback's slots it puts in Redis (ts.localSlots)
	slotsSent   []string       // their ids
	pair        int            // in a gcraLua call: the number of its limit pair (appendLean)
}

// carry takes over what the local fallback admitted for team t that Redis
// has not heard of (ts.unshared): the fallback's RPM and TPM resets, in µs,
// which the batch's script adds to the shared TATs (0, 0 when none).
func (g *teamBatch) carry(r *Redis, ts *teamState, t *catalog.Team) (lr, lt int64) {
	if g.carried = ts.unshared.Load() && ts.unshared.Swap(false); g.carried {
		rr, tr := r.local.Resets(t.Name)
		lr, lt = rr.Microseconds(), tr.Microseconds()
	}
	return lr, lt
}

// runBatch sends the calls of batch in beginLua calls (beginCalls; in
// one pipeline when there are several), and hands each its part of the
// answer. A team's admissions form one group, decided with the group's
// limits (its first admission's): an admission whose team limits differ
// (a config reload between two admissions of the batch) starts a group of
// its own, so each is decided with its own limits, by the script its own
// limits need. The team's groups run one after the other in the same call
// (one shard) or pipeline (Cluster): still one round trip.
func (r *Redis) runBatch(ctx context.Context, leader *admitCall, batch []*admitCall) {
	var groups []*teamBatch
	var index map[*teamState]*teamBatch // made only for a batch of several calls
	for _, c := range batch {
		if g := index[c.ts]; g != nil && sameLimits(g.calls[0].q.Team, c.q.Team) {
			g.calls = append(g.calls, c)
			continue
		}
		g := &teamBatch{calls: []*admitCall{c}}
		groups = append(groups, g)
		if len(batch) > 1 {
			if index == nil {
				index = make(map[*teamState]*teamBatch, len(batch))
			}
			index[c.ts] = g
		}
	}
	until := batch[0].until
	for _, c := range batch[1:] {
		if c.until.Before(until) {
			until = c.until
		}
	}
	if time.Until(until) < r.timeout/4 {
		// too late to send: nothing is built, so nothing is taken and put back
		r.settleCall(&beginCall{groups: groups}, leader, nil, errLate)
		return
	}
	calls := r.beginCalls(groups)
	if len(batch) > 1 {
		ctx = context.WithoutCancel(ctx) // the leader's client going away must not fail the others
	}
	cctx, cancel := context.WithDeadline(ctx, until)
	defer cancel()
	if len(calls) == 1 {
		c := calls[0]
		res, err := c.script().Run(cctx, r.c, c.keys, c.args...).Slice()
		r.settleCall(c, leader, res, err)
		return
	}
	cmds := make([]*redis.Cmd, len(calls))
	_, _ = r.c.Pipelined(cctx, func(p redis.Pipeliner) error {
		for i, c := range calls {
			cmds[i] = c.script().EvalSha(cctx, p, c.keys, c.args...)
		}
		return nil
	})
	rerunNoScript(cctx, r.c, cmds, func(i int) (*redis.Script, []string, []any) {
		return calls[i].script(), calls[i].keys, calls[i].args
	})
	for i, c := range calls {
		res, err := cmds[i].Slice()
		r.settleCall(c, leader, res, err)
	}
}

// sameLimits reports whether a and b (two snapshots of one team) have the
// same team limits, those the group's script call sends once for all its
// admissions (limitArgs): the same snapshot nearly always, compared by
// pointer.
func sameLimits(a, b *catalog.Team) bool {
	return a == b || (a.RPM == b.RPM && a.TPM == b.TPM && a.MaxParallel == b.MaxParallel && a.Budget == b.Budget)
}

// beginCall is one beginLua call: the teams it decides, with its keys,
// arguments and the number of values it returns.
type beginCall struct {
	groups  []*teamBatch
	keys    []string
	args    []any
	results int
	lean    bool // every team of the call has RPM and TPM only: gcraLua
}

// script is the script c runs.
func (c *beginCall) script() *redis.Script {
	if c.lean {
		return gcraScript
	}
	return beginScript
}

// leanGroup reports whether g fits gcraLua: its team has RPM and TPM
// limits only (so no slot releases), and its admissions meet no other
// level.
func leanGroup(g *teamBatch) bool {
	t := g.calls[0].q.Team
	if t.MaxParallel > 0 || t.Budget.USD > 0 || g.calls[0].ts.nLocalSlots.Load() > 0 {
		return false
	}
	for _, a := range g.calls {
		if a.nsub > 0 {
			return false
		}
	}
	return true
}

// beginCalls packs a batch's teams into script calls: on one shard up to
// teamsPerCall teams per call (Redis's clock read and the script started
// once for all of them), on Cluster one team per call (its keys share one
// hash tag).
func (r *Redis) beginCalls(groups []*teamBatch) []*beginCall {
	per := 1
	if r.cfg.OneShard {
		per = r.teamsPerCall
	}
	calls := make([]*beginCall, 0, (len(groups)+per-1)/per)
	for len(groups) > 0 {
		n := min(per, len(groups))
		c := &beginCall{groups: groups[:n:n], lean: !r.general}
		groups = groups[n:]
		for _, g := range c.groups {
			c.lean = c.lean && leanGroup(g)
		}
		if c.lean {
			r.appendLean(c)
			calls = append(calls, c)
			continue
		}
		nk, na := 0, 2
		for _, g := range c.groups {
			nk += 3
			na += 11 + 6*len(g.calls)
			for _, a := range g.calls {
				nk += len(a.pins) + 3*a.nsub
				na += 10 * a.nsub
				if a.lease != nil {
					nk, na = nk+1, na+1
				}
				c.results += a.results()
			}
		}
		c.keys, c.args = make([]string, 0, nk), make([]any, 0, na)
		c.args = append(c.args, r.lease, n)
		for _, g := range c.groups {
			r.appendBegin(c, g)
		}
		calls = append(calls, c)
	}
	return calls
}

// appendBegin adds g's part to c: the team's keys and limits, its pending
// releases, and each admission's reservation, slot and pin keys.
func (r *Redis) appendBegin(c *beginCall, g *teamBatch) {
	ts, t := g.calls[0].ts, g.calls[0].q.Team
	tk := ts.keys.begin()
	c.keys = append(c.keys, tk[:]...)
	g.adds, g.slotsSent = ts.takeLocalSlots(g.adds[:0], g.slotsSent[:0])
	for _, a := range g.adds {
		c.keys = append(c.keys, a.key)
	}
	for _, a := range g.calls {
		for j := range a.nsub {
			k := &a.subs[j].keys
			c.keys = append(c.keys, k.tat, k.par, k.bud)
		}
		c.keys = append(c.keys, a.pins...)
		if a.lease != nil {
			c.keys = append(c.keys, a.lease.key)
		}
	}
	g.rel, g.taken = ts.takeReleases()
	var now int64 // Unix ns, read when a level may carry the fallback's TATs
	if parallelLevels(g.calls) {
		g.lrel = ts.takeLevelReleases(g.calls, g.lrel[:0])
	}
	la := ts.keys.limitArgs(t)
	lr, lt := g.carry(r, ts, t)
	c.args = append(c.args, la.args[0], la.args[1], la.args[2], la.args[3], la.args[4], lr, lt, len(g.rel))
	for _, id := range g.rel {
		c.args = append(c.args, id)
	}
	c.args = append(c.args, len(g.adds))
	for _, a := range g.adds {
		c.args = append(c.args, a.id)
	}
	c.args = append(c.args, len(g.calls))
	for _, a := range g.calls {
		c.args = append(c.args, a.cost, a.usd, a.slot, len(a.pins), a.nsub)
		if a.lease != nil {
			c.args = append(c.args, a.lease.ttl, a.lease.tok)
		} else {
			c.args = append(c.args, 0)
		}
		for j := range a.nsub {
			sc := &a.subs[j]
			var lr, lt int64
			if now == 0 && ts.unsharedSubs.Load() != nil { // the clock only after an outage
				now = r.cfg.Clock().UnixNano()
			}
			if ts.takeUnsharedSub(sc.keys.base, now) {
				rr, tr := r.local.SubResets(sc.keys.base)
				lr, lt = rr.Microseconds(), tr.Microseconds()
				g.subsCarried = append(g.subsCarried, sc.keys.base)
			}
			c.args = ts.keys.levelArgs(c.args, sc.lv)
			c.args = append(c.args, lr, lt, sc.cost, sc.usd)
			c.args = g.appendLevelReleases(c.args, sc.keys.base)
		}
	}
}

// appendLevelReleases appends the number of the level's pending releases
// this call carries and their ids: the first admission of the call that
// meets the level carries them all, the others none.
func (g *teamBatch) appendLevelReleases(args []any, base string) []any {
	for i := range g.lrel {
		l := &g.lrel[i]
		if l.keys.base != base || l.sent {
			continue
		}
		l.sent = true
		args = append(args, len(l.rel))
		for _, id := range l.rel {
			args = append(args, id)
		}
		return args
	}
	return append(args, 0)
}

// appendLean builds c's keys and arguments for gcraLua: the call's
// distinct limit pairs first (teams of one plan share a boxed tuple, so a
// pointer compare finds them), then each team's pair and admissions.
func (r *Redis) appendLean(c *beginCall) {
	var pairs [8]*boxedLimits
	distinct := pairs[:0]
	na, nk := 2, 0
	for _, g := range c.groups {
		la := g.calls[0].ts.keys.limitArgs(g.calls[0].q.Team)
		g.pair = 0
		for j, b := range distinct {
			if b == la {
				g.pair = j + 1
				break
			}
		}
		if g.pair == 0 {
			distinct = append(distinct, la)
			g.pair = len(distinct)
		}
		na += 4 + 3*len(g.calls)
		nk++
		for _, a := range g.calls {
			c.results += a.results()
			nk += len(a.pins)
			if a.lease != nil {
				nk, na = nk+1, na+1
			}
		}
	}
	c.keys, c.args = make([]string, 0, nk), make([]any, 0, na+2*len(distinct))
	c.args = append(c.args, len(distinct))
	for _, b := range distinct {
		c.args = append(c.args, b.args[0], b.args[1])
	}
	c.args = append(c.args, len(c.groups))
	for _, g := range c.groups {
		ts, t := g.calls[0].ts, g.calls[0].q.Team
		c.keys = append(c.keys, ts.keys.tat())
		for _, a := range g.calls {
			c.keys = append(c.keys, a.pins...)
			if a.lease != nil {
				c.keys = append(c.keys, a.lease.key)
			}
		}
		if lr, lt := g.carry(r, ts, t); g.carried {
			c.args = append(c.args, g.pair, -len(g.calls), lr, lt)
		} else {
			c.args = append(c.args, g.pair, len(g.calls))
		}
		for _, a := range g.calls {
			if a.lease != nil {
				c.args = append(c.args, a.cost, len(a.pins), a.lease.ttl, a.lease.tok)
			} else {
				c.args = append(c.args, a.cost, len(a.pins), 0)
			}
		}
	}
}

// errLate is the fallback cause of admissions whose redis.timeout ran out
// in the queue, before their batch could be sent.
var errLate = errors.New("edge: redis.timeout ran out before the admission's batch could be sent")

// errShortBegin is the cause when a begin script's answer does not have a
// result for every admission it carried.
var errShortBegin = errors.New("edge: begin script returned fewer values than its admissions")

// settleCall hands each admission of c its part of the script's answer
// (or the error), and puts back the releases of a team whose call failed.
// It runs before the next batch is built, and before it wakes anyone: the
// local fallback learns each team's answer (learn), so an admission of a
// later batch that fails never admits locally what this call admitted in
// Redis; and the admissions of a failed call are decided locally here, so
// the next call of their team carries what the fallback admitted and Redis
// never admits it again (SPEC 9: shared or local, never both).
func (r *Redis) settleCall(c *beginCall, leader *admitCall, res []any, err error) {
	if err == nil && len(res) != c.results {
		err = errShortBegin
	}
	off := 0
	for _, g := range c.groups {
		if err != nil {
			ts := g.calls[0].ts
			ts.putBackReleases(g.rel[:g.taken])
			ts.putBackLevelReleases(g.lrel)
			ts.settleLocalSlots(r, g.calls[0].q.Team, g.slotsSent, false)
			if g.carried {
				ts.unshared.Store(true)
			}
			if len(g.subsCarried) > 0 {
				until := r.cfg.Clock().Add(time.Minute + time.Second).UnixNano()
				for _, base := range g.subsCarried {
					ts.markUnsharedSub(base, 0, until)
				}
			}
			for _, a := range g.calls {
				a.d, a.localErr = r.admitLocal(ts, a.q)
			}
		} else {
			for _, a := range g.calls {
				end := off + a.results()
				a.res = res[off:end:end]
				a.d = decision(a)
				off = end
			}
			g.calls[0].ts.settleLocalSlots(r, g.calls[0].q.Team, g.slotsSent, true)
			r.learn(g)
		}
		for _, a := range g.calls {
			a.err = err
			if a != leader {
				a.done <- struct{}{}
			}
		}
	}
}

// learn teaches the local fallback what Redis answered g's admissions
// (SPEC 9: a decision is shared or local, never both): the latest RPM and
// TPM TATs, and a budget refusal's block. A refusal says only that its
// reservation did not fit: the block refuses reservations at least that
// large until the period resets, and leaves smaller ones to the
// fallback's share (BlockBudget).
func (r *Redis) learn(g *teamBatch) {
	t := g.calls[0].q.Team
	var rpm, tpm, budget time.Duration
	var from float64 // the smallest team reservation refused (with budget > 0)
	for _, a := range g.calls {
		at := levelAt(0)
		rpm, tpm = max(rpm, micros(resInt(a.res, at+1))), max(tpm, micros(resInt(a.res, at+3)))
		for j := range a.nsub {
			at := levelAt(1 + j)
			r.local.MirrorSub(a.subs[j].local(), micros(resInt(a.res, at+1)), micros(resInt(a.res, at+3)))
		}
		if a.d.Kind == ratelimit.KindBudget {
			if a.d.Level == 0 {
				if budget == 0 || a.usd < from {
					from = a.usd
				}
				budget = max(budget, a.d.RetryAfter)
			} else if j := int(resInt(a.res, 3)); j >= 1 && j <= a.nsub {
				r.local.BlockBudget(a.subs[j-1].keys.base, true, r.cfg.Clock().Add(a.d.RetryAfter).UnixNano(), a.subs[j-1].usd)
			}
		}
	}
	r.local.Mirror(g.calls[0].ts.local, t, rpm, tpm)
	if budget > 0 {
		r.local.BlockBudget(t.Name, false, r.cfg.Clock().Add(budget).UnixNano(), from)
	}
}

// resInt is res[i] as an integer (0 when absent).
func resInt(res []any, i int) int64 {
	if i >= len(res) {
		return 0
	}
	v, _ := res[i].(int64)
	return v
}
