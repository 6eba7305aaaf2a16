package edge

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"switchyard/catalog"
	"switchyard/cluster"
	"switchyard/internal/registry"
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
	// OnDropped: n writes of a kind ("audit", "pins", "releases": slot
	// releases and coalescing lease ends, which their leases then free) were
	// not kept for Redis because the writer's bound was reached. (The node's
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
	// CoalescePoll is how often a follower of another node's lease looks
	// for its entry, besides the leader's notice (default 100ms; SPEC 18).
	CoalescePoll time.Duration
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
	Subscribe(ctx context.Context, channels ...string) *redis.PubSub
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
	lease   any    // cfg.SlotLease in ms, boxed once (ARGV 1 of beginLua)
	channel string // the coalescing leases' notice channel (noticeChannel)
	notices *notices
	// teamsPerCall is how many teams one beginLua call carries on one shard
	// (maxTeamsPerCall; tests lower it)
	teamsPerCall int
	w            *writer

	seq   atomic.Uint64
	teams registry.Map[*teamState] // team name -> its record
	comb  combiner                 // the node's admission combiner when cfg.OneShard
	alert atomic.Pointer[BudgetAlert]
	// general sends every admission through beginLua, never gcraLua
	// (tests: the scenario table runs both variants)
	general bool
}

// TeamNames implements State: every team the edge keeps a record of.
func (r *Redis) TeamNames(fn func(team string)) {
	r.teams.Range(func(name string, _ *teamState) { fn(name) })
}

// ForgetTeams implements State: it drops the records of the teams drop
// names, with their state in the local fallback (SPEC 16: memory grows
// with the bounded stores only, also under team churn). A record still
// busy (writes not yet in Redis, a batch in flight, usage waiting, a live
// slot) is kept for a later sweep, so nothing is lost and a team created
// again never gets a second record sending under the first one's
// applied-batch mark.
func (r *Redis) ForgetTeams(drop func(team string) bool) {
	r.teams.Range(func(name string, ts *teamState) {
		if drop(name) && ts.idle() && r.teams.CompareAndDelete(name, ts) {
			r.local.Forget(name)
		}
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
	if cfg.CoalescePoll <= 0 {
		cfg.CoalescePoll = defaultCoalescePoll
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
		channel: noticeChannel(cfg.Prefix),
	}
	r.notices = newNotices(c, r.channel)
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
	ts, ok := r.teams.Load(t.Name)
	if !ok {
		n := newTeamState(r.cfg.Prefix, t.Name, r.node)
		n.owner, n.local = r, r.local.Ref(t.Name)
		if !r.cfg.OneShard {
			n.comb = new(combiner)
		}
		ts, _ = r.teams.LoadOrStore(t.Name, n)
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
	b := Begun{q: q.Pins, team: t, ts: ts, tokens: q.Tokens, Decision: ratelimit.Decision{Allowed: true}, levels: q.levelsLimited()}
	// pins to read: names, and this node's own writes not yet in Redis
	var names [5]string
	var slots [5]int // index into Pins: 0 tier, 1+i dep i, 3+i cache entry i
	n := 0
	lease := q.Pins.Lease & 1 // the leased entry is read first (the scripts' miss test)
	for j := range 2 {
		if i := lease ^ j; q.Pins.Cache[i] != "" {
			names[n], slots[n] = q.Pins.Cache[i], 3+i
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
	var ls *leaseReq // the coalescing lease to take or find (SPEC 18): the entry is read first
	if q.Pins.Coalesce && n > 0 && slots[0] == 3+lease {
		ls = r.newLease(ctx, ts, q.Pins.Cache[lease])
		r.notices.start() // subscribed before this node's first follower waits
	}
	lim := q.limited()
	if !lim && n == 0 {
		return b, nil
	}
	if !r.sharedFor(ts.keys.base()) {
		return r.beginLocal(ctx, q, b, names[:n], slots[:n], cluster.ErrBreakerOpen, nil, ls)
	}
	keys := make([]string, n)
	for i, nm := range names[:n] {
		keys[i] = ts.keys.base() + nm
	}
	if !lim {
		var vals []any
		var role int64
		var err error
		if ls != nil {
			vals, role, err = r.readLease(ctx, keys, ls)
		} else {
			cctx, cancel := context.WithTimeout(ctx, r.timeout)
			vals, err = r.c.MGet(cctx, keys...).Result()
			cancel()
			if err == nil && len(vals) != n {
				err = errors.New("edge: MGET returned " + strconv.Itoa(len(vals)) + " values")
			}
		}
		if err != nil {
			return r.beginLocal(ctx, q, b, names[:n], slots[:n], err, nil, ls)
		}
		for i, v := range vals {
			s, _ := v.(string)
			b.Pins.set(slots[i], s)
		}
		if ls != nil {
			r.leaseRole(&b, ts, ls, role)
		}
		return b, nil
	}

	ac := &admitCall{ts: ts, q: q, cost: ratelimit.Reservation(q.Tokens, t.TPM), pins: keys, lease: ls, until: time.Now().Add(r.timeout)}
	if t.Budget.USD > 0 {
		ac.usd = max(0, q.CostUSD)
	}
	par := t.MaxParallel > 0
	for _, lv := range [2]*Level{&q.Key, &q.User} {
		if !lv.limited() {
			continue
		}
		sc := &ac.subs[ac.nsub]
		ac.nsub++
		sc.lv, sc.keys, sc.cost = lv, newLevelKeys(ts.keys.base(), lv), ratelimit.Reservation(q.Tokens, lv.Limits.TPM)
		if lv.Limits.Budget.USD > 0 {
			sc.usd = max(0, q.CostUSD)
		}
		par = par || lv.Limits.MaxParallel > 0
	}
	if par {
		ac.slot = r.node + ":" + strconv.FormatUint(r.seq.Add(1), 36)
	}
	res, err := r.admit(ctx, ac) // settleCall checked its length and decoded ac.d
	if err != nil {
		return r.beginLocal(ctx, q, b, names[:n], slots[:n], err, ac, ls)
	}
	at := ac.pinsAt()
	for i := range n {
		s, _ := res[at+i].(string)
		b.Pins.set(slots[i], s)
	}
	if ls != nil {
		r.leaseRole(&b, ts, ls, resInt(res, at+n))
	}
	b.Decision = ac.d
	if !ac.d.Allowed {
		return b, nil
	}
	b.t = ticket{admitted: true, slot: ac.slot, teamSlot: t.MaxParallel > 0, end: resInt(res, levelAt(0)+4), usd: ac.usd, window: resInt(res, levelAt(0)+5)}
	if t.TPM > 0 {
		b.t.reserved = ac.cost
	}
	if ac.nsub > 0 {
		b.t.subs = new([2]subTicket)
	}
	subUSD := false // a key or user level reserved budget: hold counts it
	for j := range ac.nsub {
		sc := &ac.subs[j]
		st := subTicket{lv: *sc.lv, keys: sc.keys, end: resInt(res, levelAt(1+j)+4), usd: sc.usd, window: resInt(res, levelAt(1+j)+5), slot: sc.lv.Limits.MaxParallel > 0}
		if sc.lv.Limits.TPM > 0 {
			st.reserved = sc.cost
		}
		subUSD = subUSD || sc.usd > 0
		b.t.subs[j] = st
	}
	b.t.nsub = ac.nsub
	if ac.usd > 0 {
		ts.heldOf().team.Add(nanoUSD(ac.usd)) // counted by the fallback until Finish (sharedSpend)
	}
	if ac.slot != "" || subUSD {
		ts.hold(t, &b.t)
	}
	return b, nil
}

// beginLocal answers Begin from local state after the shared call failed
// (err) or was not tried (the breaker is open). ac is the admission of a
// failed call (nil for the other paths): settleCall has decided it already,
// and its slot may have been taken by the script. ls is the coalescing
// lease the call asked for (nil: none): the request leads without it.
func (r *Redis) beginLocal(ctx context.Context, q *Request, b Begun, names []string, slots []int, err error, ac *admitCall, ls *leaseReq) (Begun, error) {
	b.Local = true
	if ls != nil {
		r.lostLease(&b, b.stateOf(r), q.Team, ls, err)
	}
	if ctx.Err() == nil || !errors.Is(err, ctx.Err()) {
		r.obs.OnFallback("ratelimit") // not when the caller itself gave up: Redis was not at fault
	}
	for i, nm := range names {
		if v, ok, _ := r.pins.GetTier(ctx, nm); ok {
			b.Pins.set(slots[i], v)
		}
	}
	if !q.limited() {
		return b, nil
	}
	b.lv = levelsOf(q) // a local ticket's Finish reconciles them
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
			r.releaseLost(b.stateOf(r), q.Team, ac)
		}
		if lerr != nil {
			return b, lerr
		}
	}
	b.Decision = d
	if d.Allowed {
		b.t = ticket{admitted: true, local: true, lt: d.Ticket}
		if maybeTaken {
			b.t.remote = ac
		}
	}
	b.Decision.Ticket = ratelimit.Ticket{}
	return b, nil
}

// releaseLost queues the release, at every level, of a slot an admission
// script may have taken in Redis although its answer never arrived.
func (r *Redis) releaseLost(ts *teamState, t *catalog.Team, ac *admitCall) {
	w := finishWrite{}
	if t.MaxParallel > 0 {
		w.slot = ac.slot
	}
	for j := range ac.nsub {
		sc := &ac.subs[j]
		if sc.lv.Limits.MaxParallel > 0 {
			w.subs[w.nsub] = subWrite{lv: *sc.lv, keys: sc.keys, slot: ac.slot}
			w.nsub++
		}
	}
	if visit, urgent := ts.add(t, &w, r.w, r.cfg.MaxPins); visit {
		r.w.markDirty(ts, urgent)
	}
}

// admitLocal decides q in the local fallback; an admission marks its team
// unshared, and its key and user levels with rpm or tpm, so the next
// admission script of the team, and of each such level, tells Redis; and
// its max_parallel slot goes to Redis with the team's next admission
// script (localSlots).
func (r *Redis) admitLocal(ts *teamState, q *Request) (ratelimit.Decision, error) {
	a := ratelimit.Admission{RequestID: q.RequestID, Team: q.Team, Tokens: q.Tokens, CostUSD: q.CostUSD, Until: q.Deadline}
	gcra := q.Team.RPM > 0 || q.Team.TPM > 0
	var bases, budgets [2]string // the levels with max_parallel, with a budget
	for j, lv := range [2]*Level{&q.Key, &q.User} {
		if lv.limited() {
			a.Levels[j] = ratelimit.Level{Key: newLevelKeys(ts.keys.base(), lv).base, Name: lv.Name, Limits: lv.Limits}
			gcra = gcra || lv.Limits.RPM > 0 || lv.Limits.TPM > 0
			if lv.Limits.MaxParallel > 0 {
				bases[j] = a.Levels[j].Key
			}
			if lv.Limits.Budget.USD > 0 {
				budgets[j] = a.Levels[j].Key
			}
		}
	}
	countSharedSlots(ts, q, &a, bases)
	countSharedSpend(ts, q, &a, budgets)
	d, err := r.local.Admit(context.Background(), a)
	if err == nil && d.Allowed && d.Ticket.Slot != "" {
		// the slot goes to Redis with the team's next admission script
		s := &localSlot{team: q.Team.MaxParallel > 0}
		for _, lv := range [2]*Level{&q.Key, &q.User} {
			if lv.limited() && lv.Limits.MaxParallel > 0 {
				s.subs[s.nsub] = subSlot{lv: *lv, keys: newLevelKeys(ts.keys.base(), lv)}
				s.nsub++
			}
		}
		ts.addLocalSlot(r.node+":"+d.Ticket.Slot, s)
	}
	if err == nil && d.Allowed && gcra {
		ts.unshared.Store(true)
		now := r.cfg.Clock()
		for j, lv := range [2]*Level{&q.Key, &q.User} {
			if lv.limited() && (lv.Limits.RPM > 0 || lv.Limits.TPM > 0) {
				// a local TAT is never more than a window (and a tolerance) ahead
				ts.markUnsharedSub(a.Levels[j].Key, now.UnixNano(), now.Add(time.Minute+time.Second).UnixNano())
			}
		}
	}
	return d, err
}

// countSharedSlots makes the local fallback count, against its share of
// each max_parallel, the slots this node's requests admitted in Redis still
// hold (SPEC 3, 9: a decision is shared or local, never both): without it
// a node that lost Redis with its share of requests running admitted a
// whole share more. It sets a's held slots at the team level and at the
// levels with max_parallel (bases: their keys' base); the local limiter
// counts them beside its own.
func countSharedSlots(ts *teamState, q *Request, a *ratelimit.Admission, bases [2]string) {
	if q.Team.MaxParallel <= 0 && bases == [2]string{} {
		return
	}
	team, subs := ts.sharedSlots(bases)
	if q.Team.MaxParallel > 0 {
		a.HeldSlots = int64(team)
	}
	for j := range bases {
		a.Levels[j].HeldSlots = int64(subs[j])
	}
}

// countSharedSpend makes the local fallback count, against its share of
// each budget, what this node's requests admitted in Redis and still
// running reserved there (SPEC 3.1, 9: a decision is shared or local,
// never both; spend passes a budget only by what estimates missed): their
// cost reaches the fallback's spend only when they end, and without it a
// node that lost Redis with its requests running admitted its whole share
// again on top of their reservations. It sets a's held spend at the team
// level and at the levels with a budget (budgets: their keys' base); the
// local limiter adds it to the level's spend.
func countSharedSpend(ts *teamState, q *Request, a *ratelimit.Admission, budgets [2]string) {
	if q.Team.Budget.USD <= 0 && budgets == [2]string{} {
		return
	}
	team, subs := ts.sharedSpend(budgets)
	if q.Team.Budget.USD > 0 {
		a.HeldUSD = team
	}
	for j := range budgets {
		a.Levels[j].HeldUSD = subs[j]
	}
}

// Close implements State: it stops the writer and sends what is pending,
// bounded by ctx.
func (r *Redis) Close(ctx context.Context) error {
	r.notices.close()
	return r.w.close(ctx)
}

func micros(us int64) time.Duration { return time.Duration(max(0, us)) * time.Microsecond }

// set stores a pin read into its place: 0 tier, 1+i deployment i, 3+i
// cache entry i (a coalescing lease read from an entry's key is a missing
// entry: IsLease).
func (p *Pins) set(slot int, v string) {
	switch {
	case slot == 0:
		p.Tier = v
	case slot <= 2:
		p.Deps[slot-1] = v
	case !IsLease(v):
		p.Cache[slot-3] = v
	}
}

var errNoTeam = errors.New("edge: request without a team")

var (
	_ State        = (*Redis)(nil)
	_ LeaseDropper = (*Redis)(nil)
)
