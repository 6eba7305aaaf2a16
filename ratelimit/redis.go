package ratelimit

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
)

// Store is the part of the go-redis client ratelimit uses: scripts and
// pipelines (CONVENTIONS 13). redis.UniversalClient satisfies it; tests pass
// clients of miniredis or of a real redis-server.
type Store interface {
	redis.Scripter
	Pipelined(ctx context.Context, fn func(redis.Pipeliner) error) ([]redis.Cmder, error)
}

// Redis is the cluster-wide limiter (SPEC 3, 9). Admit is one EVALSHA of
// admitLua, bounded by the Redis timeout; when it fails (error, timeout,
// breaker open) the node-local limiter answers instead, with its limits
// divided by redis.expected_replicas. Release and Reconcile never wait on
// Redis: a background flusher writes them in batches, keeps them while Redis
// is down and replays them when it is back.
//
// Admit is never retried. The client built by cluster.NewClient has command
// retries off, and a failed Admit falls back to the local decision instead
// of trying Redis again: if the failed call had in fact been applied, the
// team is over-charged by one request in Redis (the safe side), and a slot it
// may have taken is removed by Release like any other.
type Redis struct {
	// Immutable after construction.
	client  Store
	br      *cluster.Breaker // the breaker inside client (it acts as go-redis's Limiter); nil if none
	prefix  string
	timeout time.Duration
	local   *Local
	obs     Observer
	node    string // random per process: slot ids and the flusher's applied-batch mark
	fl      *flusher

	slotTTLms atomic.Pointer[any] // slot TTL backstop in ms, boxed once (ARGV 8)
	seq       atomic.Uint64
	keys      sync.Map // team name -> *teamKeys
}

// teamKeys are one team's keys, built once (no allocation per call).
type teamKeys struct {
	admit     []string // rpm+tpm TATs, parallel, budget
	reconcile []string // rpm+tpm TATs, budget, parallel, this node's mark

	limits atomic.Pointer[boxedLimits] // the limit arguments of admitLua, boxed once per config
}

// boxedLimits are ARGV 1-5 of admitLua for one team config, converted to
// interfaces once instead of on every call.
type boxedLimits struct {
	team *catalog.Team // the config they were made from (a reload makes a new one)
	args [5]any
}

// limitArgs returns t's boxed limits, rebuilding them when the team's config
// changed.
func (k *teamKeys) limitArgs(t *catalog.Team) *boxedLimits {
	if b := k.limits.Load(); b != nil && b.team == t {
		return b
	}
	b := &boxedLimits{team: t, args: [5]any{max(0, t.RPM), max(0, t.TPM), max(0, t.MaxParallel), max(0, t.Budget.USD), periodSeconds(t)}}
	k.limits.Store(b)
	return b
}

// NewRedis returns the shared limiter over client. br may be nil (no breaker:
// every call goes to Redis, bounded by timeout); prefix is redis.key_prefix;
// timeout (redis.timeout, default 50ms) bounds every Admit; fallback is the
// local limiter used when Redis fails (built with the expected-replicas
// divisor; nil means NewLocal(time.Now, 1)); obs may be nil. The flusher
// goroutine runs until Close.
func NewRedis(client Store, br *cluster.Breaker, prefix string, timeout time.Duration, fallback *Local, obs Observer) *Redis {
	if timeout <= 0 {
		timeout = cluster.DefaultTimeout
	}
	if fallback == nil {
		fallback = NewLocal(time.Now, 1)
	}
	if obs == nil {
		obs = NopObserver{}
	}
	r := &Redis{
		client: client, br: br, prefix: prefix, timeout: timeout,
		local: fallback, obs: obs, node: nodeID(),
	}
	r.storeSlotTTL(DefaultSlotTTL)
	r.fl = newFlusher(client, r.teamKeys, obs, flushTimeout(timeout))
	go r.fl.run()
	return r
}

// flushTimeout bounds one batched write: longer than a request-path call,
// since nobody waits on it, but short enough to notice a hung Redis.
func flushTimeout(t time.Duration) time.Duration { return max(4*t, 250*time.Millisecond) }

// SetSlotTTL sets the backstop expiry of a max_parallel slot, normally
// server.request_timeout plus a margin (DefaultSlotTTL when unset). Call it
// before the first Admit; it also sets the fallback's.
func (r *Redis) SetSlotTTL(d time.Duration) {
	if d > 0 {
		r.storeSlotTTL(d)
		r.local.SetSlotTTL(d)
	}
}

func (r *Redis) storeSlotTTL(d time.Duration) {
	var ms any = d.Milliseconds()
	r.slotTTLms.Store(&ms)
}

// Shared reports whether admissions are currently decided in Redis (the
// breaker is closed) rather than by the local fallback.
func (r *Redis) Shared() bool { return r.br == nil || r.br.Up() }

// SetRetryInterval sets how long the flusher waits after a failed write
// before trying again (default 200ms).
func (r *Redis) SetRetryInterval(d time.Duration) {
	if d > 0 {
		r.fl.retry.Store(int64(d))
	}
}

func nodeID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (r *Redis) teamKeys(team string) *teamKeys {
	if v, ok := r.keys.Load(team); ok {
		return v.(*teamKeys)
	}
	k := func(name string) string { return cluster.TeamKey(r.prefix, team, name) }
	tk := &teamKeys{
		admit:     []string{k("tat"), k("par"), k("budget")},
		reconcile: []string{k("tat"), k("budget"), k("par"), k("applied:" + r.node)},
	}
	v, _ := r.keys.LoadOrStore(team, tk)
	return v.(*teamKeys)
}

// Admit implements Limiter: one round trip for every dimension, or none for
// a team without limits.
func (r *Redis) Admit(ctx context.Context, a Admission) (Decision, error) {
	return r.AdmitWith(ctx, a, nil)
}

// AdmitWith is Admit with the caller's own commands (session pin lookups)
// queued in the same pipeline, so the edge limits and the lookups cost one
// round trip before the upstream call (SPEC 9). also, when not nil, is
// called once to queue them; the caller reads their results after
// AdmitWith returns (on a failed round trip they carry the error, and the
// decision falls back as Admit's does).
func (r *Redis) AdmitWith(ctx context.Context, a Admission, also func(redis.Pipeliner)) (Decision, error) {
	if a.Team == nil {
		return Decision{}, errNoTeam
	}
	t := a.Team
	if unlimited(t) {
		if also != nil {
			cctx, cancel := context.WithTimeout(ctx, r.timeout)
			_, _ = r.client.Pipelined(cctx, func(p redis.Pipeliner) error { also(p); return nil })
			cancel()
		}
		return unlimitedDecision(a, false), nil
	}
	cost := reservation(a.Tokens, t.TPM)
	var slot string
	if t.MaxParallel > 0 {
		slot = r.slotID()
	}
	keys := r.teamKeys(t.Name)
	lim := keys.limitArgs(t)
	args := []any{lim.args[0], lim.args[1], lim.args[2], lim.args[3], lim.args[4], cost, slot, *r.slotTTLms.Load()}
	cctx, cancel := context.WithTimeout(ctx, r.timeout)
	var res []int64
	var err error
	if also == nil {
		res, err = admitScript.Run(cctx, r.client, keys.admit, args...).Int64Slice()
	} else {
		var eval *redis.Cmd
		_, _ = r.client.Pipelined(cctx, func(p redis.Pipeliner) error {
			eval = admitScript.EvalSha(cctx, p, keys.admit, args...)
			also(p)
			return nil
		})
		res, err = eval.Int64Slice()
		if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			// the script cache was flushed: load it and admit on its own
			res, err = admitScript.Run(cctx, r.client, keys.admit, args...).Int64Slice()
		}
	}
	cancel()
	if err == nil && len(res) != 7 {
		err = errors.New("ratelimit: admit script returned " + strconv.Itoa(len(res)) + " values")
	}
	if err != nil {
		return r.fallback(ctx, a, slot, err)
	}

	d := Decision{
		Allowed:       res[0] == 1,
		LimitRequests: max(0, t.RPM), RemainingRequests: res[3], ResetRequests: micros(res[4]),
		LimitTokens: max(0, t.TPM), RemainingTokens: res[5], ResetTokens: micros(res[6]),
	}
	if !d.Allowed {
		k := int(res[1])
		if k <= 0 || k >= len(kinds) {
			k = 1
		}
		d.Kind, d.RetryAfter = kinds[k], micros(res[2])
		if d.Kind == KindBudget {
			r.local.blockBudget(t.Name, r.local.clock().Add(d.RetryAfter).UnixNano())
		}
		r.obs.OnReject(t.Name, d.Kind)
		return d, nil
	}
	d.Ticket = Ticket{Team: t.Name, RequestID: a.RequestID, Slot: slot, team: t}
	if t.TPM > 0 {
		d.Ticket.Reserved = cost
	}
	return d, nil
}

// fallback answers an Admit whose Redis call failed from the local limiter.
func (r *Redis) fallback(ctx context.Context, a Admission, slot string, err error) (Decision, error) {
	if ctx.Err() == nil || !errors.Is(err, ctx.Err()) {
		r.obs.OnFallback("ratelimit") // not when the caller itself gave up: Redis was not at fault
	}
	d, lerr := r.local.Admit(ctx, a)
	if lerr != nil {
		return d, lerr
	}
	if !d.Allowed {
		r.obs.OnReject(a.Team.Name, d.Kind)
		return d, nil
	}
	// Unless the breaker refused the call before it was sent, the script may
	// have run and taken a slot in Redis: Release removes it too.
	if slot != "" && !errors.Is(err, cluster.ErrBreakerOpen) {
		d.Ticket.remoteSlot = slot
	}
	return d, nil
}

// slotID names a Redis slot: unique per admission across the cluster (node
// id + sequence), so clients reusing an X-Request-Id cannot share a slot.
func (r *Redis) slotID() string {
	return r.node + ":" + strconv.FormatUint(r.seq.Add(1), 36)
}

// Release implements Limiter. The slot is removed by the flusher, at once
// when Redis is up; it is never blocked on.
func (r *Redis) Release(t Ticket) {
	if t.team == nil {
		return
	}
	if t.Local {
		r.local.Release(t)
		if t.remoteSlot != "" {
			r.fl.release(t.team, t.remoteSlot)
		}
		return
	}
	if t.Slot != "" {
		r.fl.release(t.team, t.Slot)
	}
}

// Reconcile implements Limiter. A ticket granted by Redis has its TPM
// reservation corrected in Redis; one granted locally (Redis was down) is
// corrected locally, and only its spend goes to Redis, replayed when Redis is
// back, so budgets lose nothing. The spend is also counted locally, so the
// fallback knows this node's share of it.
func (r *Redis) Reconcile(t Ticket, actualTokens int64, costUSD float64) {
	tm := t.team
	if tm == nil || (tm.TPM <= 0 && tm.Budget.USD <= 0) {
		return
	}
	var usd float64
	if tm.Budget.USD > 0 && costUSD > 0 {
		usd = costUSD
	}
	if t.Local {
		r.local.Reconcile(t, actualTokens, costUSD)
		if usd > 0 {
			r.fl.add(tm, 0, usd)
		}
		return
	}
	var delta int64
	if tm.TPM > 0 && actualTokens >= 0 {
		delta = actualTokens - t.Reserved
	}
	if usd > 0 {
		r.local.spend(tm, usd)
	}
	if delta != 0 || usd > 0 {
		r.fl.add(tm, delta, usd)
	}
}

// Close implements Limiter: it stops the flusher and writes what is pending,
// bounded by ctx.
func (r *Redis) Close(ctx context.Context) error { return r.fl.close(ctx) }

func periodSeconds(t *catalog.Team) int64 {
	return max(1, int64(budgetPeriod(t)/time.Second))
}

func micros(us int64) time.Duration { return time.Duration(max(0, us)) * time.Microsecond }
