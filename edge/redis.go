package edge

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"switchyard/catalog"
	"switchyard/cluster"
	"switchyard/ratelimit"
	"switchyard/sessions"
	"switchyard/telemetry"
)

// Health is what the edge asks of the breaker that guards the Redis client:
// is Redis believed reachable. The cluster package's Breaker and Conn
// satisfy it.
type Health interface{ Up() bool }

// KeyHealth is the optional per-key answer of a Health (cluster.Conn): on
// Redis Cluster, would a call on key go to Redis now, asked of the breaker of
// the shard serving key's slot. With it a lost shard sends only its own
// teams to local state, and teams of healthy shards stay shared (SPEC 9: one
// breaker per shard). It never waits.
type KeyHealth interface{ Available(key string) bool }

// Observer is told about the events the node turns into metrics. Calls are
// synchronous and must be cheap.
type Observer interface {
	// OnFallback: a Redis call failed and local state answered (component
	// "ratelimit" or "sessions").
	OnFallback(component string)
	// OnDropped: n writes of a kind ("audit", "pins", "releases") were not
	// kept for Redis because the writer's bound was reached. (The node's
	// deployment usage writer reports "usage" to the same observer.)
	OnDropped(kind string, n int)
	// OnWriteError: Redis rejected one team's post-response writes (its
	// batch is lost, the other teams' of the same call were applied).
	OnWriteError(team, err string)
}

// NopObserver ignores every event.
type NopObserver struct{}

// OnFallback implements Observer.
func (NopObserver) OnFallback(string) {}

// OnDropped implements Observer.
func (NopObserver) OnDropped(string, int) {}

// OnWriteError implements Observer.
func (NopObserver) OnWriteError(string, string) {}

// Config tunes the Redis edge state; zero values take the defaults.
type Config struct {
	Prefix    string        // redis.key_prefix
	Timeout   time.Duration // redis.timeout: bound on Begin's round trip (default 50ms)
	SlotLease time.Duration // redis.slot_lease (default 30s)
	Divisor   int           // local fallback limits = limit / Divisor (redis.expected_replicas)
	Clock     func() time.Time
	// Writer bounds (defaults in writer.go).
	FlushEvery time.Duration // how often the writer sends what is pending (default 10ms)
	// UsageEvery is how long a team's served usage may wait before it is
	// written (default 10s): see writer.dueUsage.
	UsageEvery time.Duration
	MaxPins    int // pending pin writes kept while Redis is away (default 100,000)
	MaxAudit   int // audit entries queued for the stream (default 10,000)
	// OneShard is set when every key lives on one Redis server (standalone
	// or Sentinel, not Cluster): concurrent admissions of different teams
	// then share one script call, and the writer sends one call per flush
	// for all teams. On Cluster each team batches alone, so a slow or lost
	// shard never holds up another shard's teams.
	OneShard bool
}

// DefaultSlotLease is redis.slot_lease when the config leaves it zero.
const DefaultSlotLease = 30 * time.Second

// Client is the part of go-redis the Redis edge state uses.
// redis.UniversalClient satisfies it.
type Client interface {
	redis.Scripter
	Pipelined(ctx context.Context, fn func(redis.Pipeliner) error) ([]redis.Cmder, error)
	MGet(ctx context.Context, keys ...string) *redis.SliceCmd
	ZRem(ctx context.Context, key string, members ...any) *redis.IntCmd
}

// Redis is the cluster-wide edge state (SPEC 3, 9). Begin is one EVALSHA of
// beginLua (or one MGET of pins for a team without limits, or nothing),
// bounded by redis.timeout; when it fails, or the breaker is open, the local
// limiter (limits / expected_replicas) and the local pin store answer. Finish
// folds the outcome into the team's pending writes and the one background
// writer sends them, once per team per flush.
//
// Begin is never retried: the client built by cluster.NewClient has command
// retries off, and a failed Begin falls back to the local decision instead
// of trying Redis again. If the failed call had in fact been applied, the
// team is over-charged by one request in Redis (the safe side), and a slot
// it may have taken is released by Finish like any other.
type Redis struct {
	// Immutable after construction.
	c       Client
	health  Health    // nil: always up
	keys    KeyHealth // health's per-key answer, or nil
	cfg     Config
	local   *ratelimit.Local
	pins    *sessions.Local
	ring    *telemetry.Ring
	obs     Observer
	node    string // random per process: slot ids and the applied-batch mark
	timeout time.Duration
	lease   any // cfg.SlotLease in ms, boxed once (ARGV 1 of beginLua)
	// teamsPerCall is how many teams one beginLua call carries on one shard
	// (maxTeamsPerCall; tests lower it)
	teamsPerCall int
	w            *writer

	seq   atomic.Uint64
	teams sync.Map // team name -> *teamState
	comb  combiner // the node's admission combiner when cfg.OneShard
	alert atomic.Pointer[func(team string)]
}

// TeamNames implements State: every team the edge keeps a record of.
func (r *Redis) TeamNames(fn func(team string)) {
	r.teams.Range(func(k, _ any) bool {
		fn(k.(string))
		return true
	})
}

// ForgetTeams implements State: it drops the records of the teams drop
// names, with their state in the local fallback (SPEC 16: memory grows
// with the bounded stores only, also under team churn). A record still
// busy (writes not yet in Redis, a batch in flight, usage waiting, a live
// slot) is kept for a later sweep, so nothing is lost and a team created
// again never gets a second record sending under the first one's
// applied-batch mark.
func (r *Redis) ForgetTeams(drop func(team string) bool) {
	r.teams.Range(func(k, v any) bool {
		name, ts := k.(string), v.(*teamState)
		if drop(name) && ts.idle() && r.teams.CompareAndDelete(name, ts) {
			r.local.Forget(name)
		}
		return true
	})
}

// NewRedis returns the Redis edge state over c and starts its writer.
// health may be nil; audit stores entries for the stream (nil: none); usage,
// when not nil, is stepped by the writer (one background writer per node);
// obs may be nil.
func NewRedis(c Client, health Health, cfg Config, ring *telemetry.Ring, audit *telemetry.RedisAudit, usage *ratelimit.RedisUsage, obs Observer) *Redis {
	r := newRedis(c, health, cfg, ring, audit, usage, obs)
	go r.w.run()
	return r
}

// newRedis builds the state without starting the writer (tests step it).
func newRedis(c Client, health Health, cfg Config, ring *telemetry.Ring, audit *telemetry.RedisAudit, usage *ratelimit.RedisUsage, obs Observer) *Redis {
	if cfg.Timeout <= 0 {
		cfg.Timeout = cluster.DefaultTimeout
	}
	if cfg.SlotLease <= 0 {
		cfg.SlotLease = DefaultSlotLease
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if obs == nil {
		obs = NopObserver{}
	}
	if ring == nil {
		ring = telemetry.NewRing(1)
	}
	r := &Redis{
		c: c, health: health, cfg: cfg, obs: obs, node: nodeID(), timeout: cfg.Timeout,
		local: ratelimit.NewLocal(cfg.Clock, cfg.Divisor),
		pins:  sessions.NewLocal(cfg.Clock, sessions.DefaultMaxEntries),
		ring:  ring, lease: cfg.SlotLease.Milliseconds(), teamsPerCall: maxTeamsPerCall,
	}
	if kh, ok := health.(KeyHealth); ok {
		r.keys = kh
	}
	r.w = newWriter(r, audit, usage)
	return r
}

func nodeID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Shared implements State.
func (r *Redis) Shared() bool { return r.health == nil || r.health.Up() }

// sharedFor reports whether the call on the keys of one hash tag (a team's
// base key) goes to Redis: per shard when health answers per key.
func (r *Redis) sharedFor(key string) bool {
	if r.keys != nil {
		return r.keys.Available(key)
	}
	return r.Shared()
}

// SetDivisor sets the local fallback's divisor (redis.expected_replicas 0:
// the node calls it with the live node count of each heartbeat).
func (r *Redis) SetDivisor(n int) { r.local.SetDivisor(n) }

func (r *Redis) team(t *catalog.Team) *teamState {
	if ts, ok := t.Caches.Edge.Load().(*teamState); ok && ts.owner == r {
		return ts
	}
	var ts *teamState
	if v, ok := r.teams.Load(t.Name); ok {
		ts = v.(*teamState)
	} else {
		n := newTeamState(newTeamKeys(r.cfg.Prefix, t.Name, r.node))
		n.owner, n.local = r, r.local.Ref(t.Name)
		v, _ := r.teams.LoadOrStore(t.Name, n)
		ts = v.(*teamState)
	}
	// kept on the team (this snapshot's) for the next request; a team of a
	// snapshot that several edges share (tests) keeps the first one's
	t.Caches.Edge.CompareAndSwap(nil, ts)
	return ts
}

// stateOf is b's team record: the one Begin looked up, or r's (a Begun
// not made by r.Begin).
func (b *Begun) stateOf(r *Redis) *teamState {
	if b.ts != nil {
		return b.ts
	}
	return r.team(b.team)
}

// Begin implements State.
func (r *Redis) Begin(ctx context.Context, q *Request) (Begun, error) {
	if q.Team == nil {
		return Begun{}, errNoTeam
	}
	t := q.Team
	ts := r.team(t)
	b := Begun{q: q.Pins, team: t, ts: ts, tokens: q.Tokens, Decision: ratelimit.Decision{Allowed: true}}
	// pins to read: names, and this node's own writes not yet in Redis
	var names [5]string
	var slots [5]int // index into Pins: 0 tier, 1+i dep i, 3+i cache entry i
	n := 0
	for i, c := range q.Pins.Cache {
		if c != "" {
			names[n], slots[n] = c, 3+i
			n++
		}
	}
	if s := q.Pins.Session; s != "" {
		if a := q.Pins.TierAlias; a != "" {
			names[n], slots[n] = tierPinKey(s, a), 0
			n++
		}
		for i, m := range q.Pins.Models {
			if m != "" && (i == 0 || m != q.Pins.Models[0]) {
				names[n], slots[n] = depPinKey(s, m), 1+i
				n++
			}
		}
	}
	n = ts.ownPins(&names, &slots, n, &b.Pins)
	lim := limited(t)
	if !lim && n == 0 {
		return b, nil
	}
	if !r.sharedFor(ts.keys.base) {
		return r.beginLocal(ctx, q, b, names[:n], slots[:n], cluster.ErrBreakerOpen, nil)
	}
	keys := make([]string, n)
	for i, nm := range names[:n] {
		keys[i] = ts.keys.base + nm
	}
	if !lim {
		cctx, cancel := context.WithTimeout(ctx, r.timeout)
		vals, err := r.c.MGet(cctx, keys...).Result()
		cancel()
		if err == nil && len(vals) != n {
			err = errors.New("edge: MGET returned " + strconv.Itoa(len(vals)) + " values")
		}
		if err != nil {
			return r.beginLocal(ctx, q, b, names[:n], slots[:n], err, nil)
		}
		for i, v := range vals {
			s, _ := v.(string)
			b.Pins.set(slots[i], s)
		}
		return b, nil
	}

	ac := &admitCall{ts: ts, q: q, cost: ratelimit.Reservation(q.Tokens, t.TPM), pins: keys, until: time.Now().Add(r.timeout)}
	if t.Budget.USD > 0 {
		ac.usd = max(0, q.CostUSD)
	}
	if t.MaxParallel > 0 {
		ac.slot = r.node + ":" + strconv.FormatUint(r.seq.Add(1), 36)
	}
	cost, slot := ac.cost, ac.slot
	res, err := r.admit(ctx, ac) // settleCall checked its length and decoded ac.d
	if err != nil {
		return r.beginLocal(ctx, q, b, names[:n], slots[:n], err, ac)
	}
	for i := range n {
		s, _ := res[beginResults+i].(string)
		b.Pins.set(slots[i], s)
	}
	b.Decision = ac.d
	if !ac.d.Allowed {
		return b, nil
	}
	end, _ := res[7].(int64)
	win, _ := res[8].(int64)
	b.t = ticket{admitted: true, slot: slot, end: end, usd: ac.usd, window: win}
	if t.TPM > 0 {
		b.t.reserved = cost
	}
	if slot != "" {
		ts.hold(t, slot)
	}
	return b, nil
}

// admitCall is one admission waiting to be decided in Redis, alone or in a
// batch with the other admissions that arrived meanwhile.
type admitCall struct {
	ts    *teamState
	q     *Request
	cost  int64
	usd   float64 // reserved against the budget (0 without one)
	slot  string
	pins  []string      // full pin keys to read
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

// beginResults is how many values beginLua returns per admission before
// the pins it read.
const beginResults = 9

// results is how many values beginLua returns for c.
func (c *admitCall) results() int { return beginResults + len(c.pins) }

// decision decodes one admission's values of beginLua for team t.
func decision(t *catalog.Team, res []any) ratelimit.Decision {
	num := func(i int) int64 { v, _ := res[i].(int64); return v }
	d := ratelimit.Decision{
		Allowed:       num(0) == 1,
		LimitRequests: max(0, t.RPM), RemainingRequests: num(3), ResetRequests: micros(num(4)),
		LimitTokens: max(0, t.TPM), RemainingTokens: num(5), ResetTokens: micros(num(6)),
	}
	if !d.Allowed {
		k := num(1)
		if k <= 0 || k >= int64(len(ratelimit.Kinds)) {
			k = 1
		}
		d.Kind, d.RetryAfter = ratelimit.Kinds[k], micros(num(2))
	}
	return d
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
	return &ac.ts.comb
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
	calls   []*admitCall
	rel     []string // releases it carries
	taken   int      // how many of rel came from the pending list
	carried bool     // it carries the local fallback's TATs (ts.unshared)
}

// runBatch sends the calls of batch in beginLua calls (beginCalls; in
// one pipeline when there are several), and hands each its part of the
// answer.
func (r *Redis) runBatch(ctx context.Context, leader *admitCall, batch []*admitCall) {
	var groups []*teamBatch
	var index map[*teamState]*teamBatch // made only for a batch of several calls
	for _, c := range batch {
		if g := index[c.ts]; g != nil {
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
		res, err := beginScript.Run(cctx, r.c, c.keys, c.args...).Slice()
		r.settleCall(c, leader, res, err)
		return
	}
	cmds := make([]*redis.Cmd, len(calls))
	_, _ = r.c.Pipelined(cctx, func(p redis.Pipeliner) error {
		for i, c := range calls {
			cmds[i] = beginScript.EvalSha(cctx, p, c.keys, c.args...)
		}
		return nil
	})
	rerunNoScript(cctx, r.c, beginScript, cmds, func(i int) ([]string, []any) { return calls[i].keys, calls[i].args })
	for i, c := range calls {
		res, err := cmds[i].Slice()
		r.settleCall(c, leader, res, err)
	}
}

// beginCall is one beginLua call: the teams it decides, with its keys,
// arguments and the number of values it returns.
type beginCall struct {
	groups  []*teamBatch
	keys    []string
	args    []any
	results int
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
		c := &beginCall{groups: groups[:n:n]}
		groups = groups[n:]
		nk, na := 0, 2
		for _, g := range c.groups {
			nk += 3
			na += 10 + 4*len(g.calls)
			for _, a := range g.calls {
				nk += len(a.pins)
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
	c.keys = append(c.keys, ts.keys.begin[:]...)
	for _, a := range g.calls {
		c.keys = append(c.keys, a.pins...)
	}
	g.rel, g.taken = ts.takeReleases()
	la := ts.keys.limitArgs(t)
	var lr, lt int64 // what the local fallback admitted that Redis has not heard of
	if g.carried = ts.unshared.Load() && ts.unshared.Swap(false); g.carried {
		rr, tr := r.local.Resets(t.Name)
		lr, lt = rr.Microseconds(), tr.Microseconds()
	}
	c.args = append(c.args, la.args[0], la.args[1], la.args[2], la.args[3], la.args[4], lr, lt, len(g.rel))
	for _, id := range g.rel {
		c.args = append(c.args, id)
	}
	c.args = append(c.args, len(g.calls))
	for _, a := range g.calls {
		c.args = append(c.args, a.cost, a.usd, a.slot, len(a.pins))
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
			if g.carried {
				ts.unshared.Store(true)
			}
			for _, a := range g.calls {
				a.d, a.localErr = r.admitLocal(ts, a.q)
			}
		} else {
			for _, a := range g.calls {
				end := off + a.results()
				a.res = res[off:end:end]
				a.d = decision(a.q.Team, a.res)
				off = end
			}
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
// TPM TATs, and a budget refusal's block.
func (r *Redis) learn(g *teamBatch) {
	t := g.calls[0].q.Team
	var rpm, tpm, budget time.Duration
	for _, a := range g.calls {
		rpm, tpm = max(rpm, a.d.ResetRequests), max(tpm, a.d.ResetTokens)
		if a.d.Kind == ratelimit.KindBudget {
			budget = max(budget, a.d.RetryAfter)
		}
	}
	r.local.Mirror(g.calls[0].ts.local, t, rpm, tpm)
	if budget > 0 {
		r.local.BlockBudget(t.Name, r.cfg.Clock().Add(budget).UnixNano())
	}
}

// beginLocal answers Begin from local state after the shared call failed
// (err) or was not tried (the breaker is open). ac is the admission of a
// failed call (nil for the other paths): settleCall has decided it already,
// and its slot may have been taken by the script.
func (r *Redis) beginLocal(ctx context.Context, q *Request, b Begun, names []string, slots []int, err error, ac *admitCall) (Begun, error) {
	b.Local = true
	if ctx.Err() == nil || !errors.Is(err, ctx.Err()) {
		r.obs.OnFallback("ratelimit") // not when the caller itself gave up: Redis was not at fault
	}
	for i, nm := range names {
		if v, ok, _ := r.pins.GetTier(ctx, nm); ok {
			b.Pins.set(slots[i], v)
		}
	}
	if !limited(q.Team) {
		return b, nil
	}
	var d ratelimit.Decision
	var lerr error
	if ac != nil {
		d, lerr = ac.d, ac.localErr
	} else {
		d, lerr = r.admitLocal(b.stateOf(r), q)
	}
	// Unless the breaker refused the call before it was sent, the script
	// may have run and taken a slot in Redis whose answer was lost: Finish
	// releases it with the local admission, and a refusal releases it now
	// (it would otherwise be held for a whole lease).
	maybeTaken := ac != nil && ac.slot != "" && !errors.Is(err, errLate) && !errors.Is(err, cluster.ErrBreakerOpen)
	if lerr != nil || !d.Allowed {
		if maybeTaken {
			r.releaseLost(b.stateOf(r), q.Team, ac.slot)
		}
		if lerr != nil {
			return b, lerr
		}
	}
	b.Decision = d
	if d.Allowed {
		b.t = ticket{admitted: true, local: true, lt: d.Ticket}
		if maybeTaken {
			b.t.remote = ac.slot
		}
	}
	b.Decision.Ticket = ratelimit.Ticket{}
	return b, nil
}

// SetBudgetAlert implements State: the writer reports the crossings the
// finish script found (once for the cluster), the local fallback its own.
func (r *Redis) SetBudgetAlert(fn func(team string)) {
	r.alert.Store(&fn)
	r.local.SetBudgetAlert(fn)
}

// budgetAlert calls the alert hook, if any.
func (r *Redis) budgetAlert(team string) {
	if fn := r.alert.Load(); fn != nil {
		(*fn)(team)
	}
}

// releaseLost queues the release of a slot an admission script may have
// taken in Redis although its answer never arrived.
func (r *Redis) releaseLost(ts *teamState, t *catalog.Team, slot string) {
	if visit, urgent := ts.add(t, &finishWrite{slot: slot}, r.w, r.cfg.MaxPins); visit {
		r.w.markDirty(ts, urgent)
	}
}

// admitLocal decides q in the local fallback; an admission marks its team
// unshared, so the team's next admission script tells Redis.
func (r *Redis) admitLocal(ts *teamState, q *Request) (ratelimit.Decision, error) {
	d, err := r.local.Admit(context.Background(), ratelimit.Admission{RequestID: q.RequestID, Team: q.Team, Tokens: q.Tokens, CostUSD: q.CostUSD})
	if err == nil && d.Allowed && (q.Team.RPM > 0 || q.Team.TPM > 0) {
		ts.unshared.Store(true)
	}
	return d, err
}

// Finish implements State: every exit reconciles (SPEC 3).
func (r *Redis) Finish(b *Begun, o *Outcome) {
	t := b.team
	if t == nil {
		if o.Audit != nil {
			r.ring.Record(o.Audit)
			r.w.audit(o.Audit)
		}
		return
	}
	ts := b.stateOf(r)
	tk := b.t
	actual := int64(0)
	if o.Served {
		actual = int64(o.PromptTokens + o.CompletionTokens)
	}
	cost := 0.0
	if o.Served && t.Budget.USD > 0 && o.CostUSD > 0 {
		cost = o.CostUSD
	}
	usd := 0.0 // what the shared budget is still owed: the real cost minus the reservation
	if tk.admitted && tk.local {
		if !tk.released {
			r.local.Release(tk.lt)
		}
		r.local.Reconcile(tk.lt, actual, cost)
		usd = cost // Redis reserved nothing: it is owed the whole cost (SPEC 9: replayed)
	} else if tk.admitted && t.Budget.USD > 0 {
		usd = budgetDelta(cost, tk.usd, tk.window, r.cfg.Clock().UnixNano(), ratelimit.PeriodCode(ratelimit.BudgetPeriod(t)))
		if cost > 0 {
			r.local.Spend(t, cost) // the fallback knows this node's share of the spend
		}
	}
	var tierKey, depKey string
	if s := b.q.Session; s != "" {
		if o.TierPin != "" && b.q.TierAlias != "" {
			tierKey = r.keepPin(b, tierPinKey(s, b.q.TierAlias), o.TierPin, b.Pins.Tier, o.TierTTL)
		}
		if o.DepPin != "" && o.DepModel != "" {
			depKey = r.keepPin(b, depPinKey(s, o.DepModel), o.DepPin, b.Deployment(o.DepModel), o.DepTTL)
		}
	}
	w := finishWrite{
		slot: tk.slot, usd: usd,
		tierKey: tierKey, tier: o.TierPin, tierTTL: o.TierTTL,
		depKey: depKey, dep: o.DepPin, depTTL: o.DepTTL,
	}
	if o.CacheKey != "" && o.CacheTTL > 0 {
		w.cacheKey, w.cacheVal, w.cacheTTL = o.CacheKey, string(o.CacheValue), o.CacheTTL
	}
	if tk.local {
		w.slot = tk.remote
	} else if tk.admitted && t.TPM > 0 {
		w.delta = actual - tk.reserved
		w.end = tk.end
	}
	if o.Served && o.Deployment != "" {
		w.dep0, w.tokens, w.cost = o.Deployment, actual, o.CostUSD
	}
	visit, urgent := ts.add(t, &w, r.w, r.cfg.MaxPins)
	if o.Audit != nil {
		r.ring.Record(o.Audit)
		r.w.audit(o.Audit)
	}
	if visit {
		r.w.markDirty(ts, urgent)
	}
}

// budgetDelta is what a finished request still owes its shared budget: its
// real cost minus what its admission reserved, in the window the
// reservation was made in. Once that window has ended, the reservation
// covered the request and the new window owes nothing for it.
func budgetDelta(cost, reserved float64, window, now, code int64) float64 {
	if reserved <= 0 {
		return cost
	}
	if id, _ := ratelimit.PeriodWindow(now, code); id != window {
		return 0
	}
	return cost - reserved
}

// keepPin stores the pin key = value in the local copy and returns the key
// the writer is to send to Redis, or "" when Redis already has it: Begin
// read the same value there (read), and this node wrote it under a quarter
// of its TTL ago (then neither copy is touched, so the local one keeps the
// expiry it has in Redis). A busy session costs one renewal per quarter
// TTL instead of a write per request (SPEC 9: only the writes the request
// needs).
func (r *Redis) keepPin(b *Begun, key, value, read string, ttl time.Duration) string {
	if !b.Local && read == value {
		if r.pins.RenewTier(key, value, ttl) {
			return ""
		}
		return key
	}
	_ = r.pins.SetTier(context.Background(), key, value, ttl)
	return key
}

// Release implements State: one ZREM of the request's shared slot,
// bounded by redis.timeout; on success Finish has no release left to queue
// and the writer stops renewing the lease.
func (r *Redis) Release(ctx context.Context, b *Begun) {
	tk := &b.t
	if !tk.admitted || b.team == nil {
		return
	}
	if tk.local {
		if !tk.released {
			r.local.Release(tk.lt)
			tk.released = true
		}
		return
	}
	if tk.slot == "" {
		return
	}
	ts := b.stateOf(r)
	if !r.sharedFor(ts.keys.base) {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, r.timeout)
	err := r.c.ZRem(cctx, ts.keys.begin[1], tk.slot).Err()
	cancel()
	if err != nil {
		return // Finish queues it for the writer
	}
	ts.mu.Lock()
	delete(ts.live, tk.slot)
	ts.mu.Unlock()
	tk.slot = ""
}

// Close implements State: it stops the writer and sends what is pending,
// bounded by ctx.
func (r *Redis) Close(ctx context.Context) error { return r.w.close(ctx) }

func micros(us int64) time.Duration { return time.Duration(max(0, us)) * time.Microsecond }

// set stores a pin read into its place: 0 tier, 1+i deployment i.
func (p *Pins) set(slot int, v string) {
	switch {
	case slot == 0:
		p.Tier = v
	case slot <= 2:
		p.Deps[slot-1] = v
	default:
		p.Cache[slot-3] = v
	}
}

var errNoTeam = errors.New("edge: request without a team")

var _ State = (*Redis)(nil)
