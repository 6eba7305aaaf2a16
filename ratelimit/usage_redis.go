package ratelimit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"switchyard/internal/redisscript"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"switchyard/cluster"
)

// Store is the part of the go-redis client RedisUsage uses: scripts and
// pipelines (CONVENTIONS 13). redis.UniversalClient satisfies it.
type Store interface {
	redis.Scripter
	Pipelined(ctx context.Context, fn func(redis.Pipeliner) error) ([]redis.Cmder, error)
}

// nodeID names this process in the applied-write marks.
func nodeID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// flushTimeout bounds one background write: longer than a request-path
// call, since nobody waits on it, but short enough to notice a hung Redis.
func flushTimeout(t time.Duration) time.Duration { return max(4*t, 250*time.Millisecond) }

// usageRecordLua adds counts to a deployment's current minute on Redis's
// clock. The hash keeps the current minute (m, r, t) and the previous one
// (pr, pt); a new minute rotates them, so the key never grows. Counts may be
// negative: requests taken back (Unrecord) after they were written; what
// the current minute does not hold comes off the previous one, never below
// zero.
//
// The mark makes a write idempotent: a write whose reply was lost (a
// timeout in an unknown state) is sent again as it was, with the same seq,
// before this node sends anything newer for the deployment, and a node's
// seqs only grow, so a resend of an applied write is a no-op (SPEC 9: a
// write is never applied twice). The mark outlives the resends: counts
// older than a minute are dropped, not sent.
//
//	KEYS: 1 usage hash, 2 this node's applied-write mark for the deployment
//	ARGV: 1 requests, 2 tokens, 3 seq
//	returns 1, or 0 when the write was applied already
const usageRecordLua = `
local seq = tonumber(ARGV[3])
if seq <= tonumber(redis.call('GET', KEYS[2]) or -1) then return 0 end
redis.call('SET', KEYS[2], ARGV[3], 'PX', 180000)
local m = math.floor(tonumber(redis.call('TIME')[1]) / 60)
local h = redis.call('HMGET', KEYS[1], 'm', 'r', 't', 'pr', 'pt')
local cm = tonumber(h[1])
local r, t, pr, pt = 0, 0, 0, 0
if cm == m then
  r, t, pr, pt = tonumber(h[2]) or 0, tonumber(h[3]) or 0, tonumber(h[4]) or 0, tonumber(h[5]) or 0
elseif cm == m - 1 then
  pr, pt = tonumber(h[2]) or 0, tonumber(h[3]) or 0
end
r, t = r + tonumber(ARGV[1]), t + tonumber(ARGV[2])
if r < 0 then pr, r = math.max(pr + r, 0), 0 end
if t < 0 then pt, t = math.max(pt + t, 0), 0 end
redis.call('HSET', KEYS[1], 'm', m, 'r', r, 't', t, 'pr', pr, 'pt', pt)
redis.call('EXPIRE', KEYS[1], 180)
return 1
`

// usageReadLua estimates a deployment's sliding minute from its hash: the
// current minute plus the previous one weighted by the part of it still
// inside the last 60 seconds. It also returns the parts and how far into
// the minute Redis is, so RedisUsage.Room can tell when the estimate will
// have room without asking again.
//
//	KEYS: 1 usage hash
//	returns {requests, tokens, r, t, pr, pt, ms into the minute}
const usageReadLua = `
local t = redis.call('TIME')
local s = tonumber(t[1]) + tonumber(t[2]) / 1000000
local m = math.floor(s / 60)
local keep = 1 - (s - m * 60) / 60
local h = redis.call('HMGET', KEYS[1], 'm', 'r', 't', 'pr', 'pt')
local cm = tonumber(h[1])
local r, tk, pr, pt = 0, 0, 0, 0
if cm == m then
  r, tk, pr, pt = tonumber(h[2]) or 0, tonumber(h[3]) or 0, tonumber(h[4]) or 0, tonumber(h[5]) or 0
elseif cm == m - 1 then
  pr, pt = tonumber(h[2]) or 0, tonumber(h[3]) or 0
end
return {math.floor(r + pr * keep + 0.5), math.floor(tk + pt * keep + 0.5), r, tk, pr, pt, math.floor((s - m * 60) * 1000)}
`

// errUnwritten is returned by Close when Redis refused the last writes.
var errUnwritten = errors.New("ratelimit: usage counts left unwritten")

var (
	usageRecordScript = redis.NewScript(usageRecordLua)
	usageReadScript   = redis.NewScript(usageReadLua)
)

// DefaultUsageInterval is how often RedisUsage writes its counts and
// refreshes its cache.
const DefaultUsageInterval = 500 * time.Millisecond

// RedisUsage is the cluster-wide DeploymentUsage. Record adds to in-memory
// counters that the node's one background writer (package edge) writes to
// Redis in one pipeline per interval by calling Step; Usage answers from a
// cache of the cluster-wide counts that Step refreshes, plus this node's not
// yet written counts, so the selection path never waits on Redis. While the cache is stale (Redis
// unreachable) Usage answers from the node-local counts multiplied by the
// expected number of replicas.
type RedisUsage struct {
	// Immutable after construction.
	client   Store
	prefix   string
	timeout  time.Duration
	obs      Observer
	local    *LocalUsage
	clock    func() time.Time
	interval time.Duration

	div   atomic.Int64 // node count the local estimate is scaled by (>= 1); SetDivisor
	deps  sync.Map     // deployment id -> *depUsage
	cache atomic.Pointer[usageCache]
	node  string // random per process: the applied-write marks (immutable)

	forget atomic.Pointer[func(id string) bool] // ForgetDeployments' request, for the next Step

	seq int64 // the last write's seq (flush's own: the writer's goroutine)
}

// depUsage is one deployment's unwritten counts, and the write in flight:
// sent and not acknowledged, resent as it was (same seq) before anything
// newer of the deployment is sent.
type depUsage struct {
	keys     []string // the usage hash and this node's mark
	req, tok atomic.Int64
	since    atomic.Int64 // ns of the oldest unwritten count, 0 when none
	// the write in flight: its counts (read by Usage), and, flush's own,
	// its seq (0: none) and the ns of its oldest count
	freq, ftok atomic.Int64
	fseq       int64
	fsince     int64
}

// usageCache is one refresh of every known deployment's cluster-wide counts.
type usageCache struct {
	at   time.Time
	vals map[string]usageVals
}

// usageVals is one deployment's read: the sliding estimate (req, tok), its
// parts (this minute's r, t and the previous minute's pr, pt) and how far
// into the minute Redis was (pos, ms).
type usageVals struct {
	req, tok, r, t, pr, pt, pos int64
}

// NewRedisUsage returns a RedisUsage over client. replicas is
// redis.expected_replicas; clock drives the local fallback counts and the
// staleness of the cache (nil: time.Now). It has no goroutine: the node's
// background writer calls Step every DefaultUsageInterval.
func NewRedisUsage(client Store, prefix string, timeout time.Duration, replicas int, clock func() time.Time, obs Observer) *RedisUsage {
	if clock == nil {
		clock = time.Now
	}
	if obs == nil {
		obs = NopObserver{}
	}
	if timeout <= 0 {
		timeout = cluster.DefaultTimeout
	}
	u := &RedisUsage{
		client: client, prefix: prefix, timeout: flushTimeout(timeout), obs: obs,
		local: NewLocalUsage(clock), clock: clock,
		interval: DefaultUsageInterval, node: nodeID(),
	}
	u.SetDivisor(replicas)
	return u
}

// SetDivisor sets the node count the local usage estimate is scaled by
// while Redis is unreachable (values below 1 mean 1); see Local.SetDivisor.
func (u *RedisUsage) SetDivisor(n int) { u.div.Store(int64(max(1, n))) }

// Step writes the unwritten counts and refreshes the cache; the background
// writer calls it every DefaultUsageInterval.
func (u *RedisUsage) Step(ctx context.Context) {
	u.flush(ctx)
	if drop := u.forget.Swap(nil); drop != nil {
		u.forgetNow(*drop)
	}
	u.refresh(ctx)
}

// ForgetDeployments asks the next Step to drop the records of the
// deployments drop names (deleted through the admin API) that have nothing
// left to write: every deployment ever asked for kept its record here and
// in the local estimate, and every refresh read each one from Redis. A
// count a request still running records for a dropped deployment is lost
// with it (the deployment is gone).
func (u *RedisUsage) ForgetDeployments(drop func(id string) bool) { u.forget.Store(&drop) }

// forgetNow drops the records drop names that hold no unwritten counts and
// no write in flight (flush's goroutine: Step).
func (u *RedisUsage) forgetNow(drop func(id string) bool) {
	u.deps.Range(func(k, v any) bool {
		id, d := k.(string), v.(*depUsage)
		if drop(id) && d.fseq == 0 && d.req.Load() == 0 && d.tok.Load() == 0 {
			u.deps.Delete(id)
			u.local.deps.Delete(id)
		}
		return true
	})
}

func (u *RedisUsage) dep(id string) *depUsage {
	if v, ok := u.deps.Load(id); ok {
		return v.(*depUsage)
	}
	v, _ := u.deps.LoadOrStore(id, &depUsage{keys: []string{cluster.DeploymentKey(u.prefix, id, "usage"), cluster.DeploymentKey(u.prefix, id, "applied:"+u.node)}})
	return v.(*depUsage)
}

// Record implements DeploymentUsage; the stamp is the local count's.
func (u *RedisUsage) Record(depID string, tokens int64) int64 {
	stamp := u.local.Record(depID, tokens)
	d := u.dep(depID)
	d.req.Add(1)
	d.tok.Add(tokens)
	d.since.CompareAndSwap(0, u.clock().UnixNano())
	return stamp
}

// Unrecord implements DeploymentUsage. A count still unwritten is simply
// cancelled; one written already is taken back by writing negative counts
// (usageRecordLua). A count older than the window is left alone: it no
// longer counts anywhere.
func (u *RedisUsage) Unrecord(depID string, tokens, stamp int64) {
	u.local.Unrecord(depID, tokens, stamp)
	if u.clock().Unix()-stamp >= usageSlots {
		return
	}
	d := u.dep(depID)
	d.req.Add(-1)
	d.tok.Add(-tokens)
}

// Usage implements DeploymentUsage.
func (u *RedisUsage) Usage(depID string) (rpm, tpm int64) {
	d := u.dep(depID) // known from now on: the next refresh reads it
	if c := u.cache.Load(); c != nil && u.clock().Sub(c.at) <= 3*u.interval+u.timeout {
		v := c.vals[depID]
		return max(v.req+d.req.Load()+d.freq.Load(), 0), max(v.tok+d.tok.Load()+d.ftok.Load(), 0)
	}
	rpm, tpm = u.local.Usage(depID)
	n := u.div.Load()
	return rpm * n, tpm * n
}

// Room implements DeploymentUsage from what Usage reads, without asking
// Redis: with a fresh cache, when the cluster-wide sliding estimate (plus
// this node's unwritten counts) lets one more request of est tokens fit;
// otherwise the local estimate's.
func (u *RedisUsage) Room(depID string, rpm, tpm, est int64) time.Duration {
	d := u.dep(depID)
	now := u.clock()
	c := u.cache.Load()
	if c == nil || now.Sub(c.at) > 3*u.interval+u.timeout {
		return u.local.room(depID, rpm, tpm, est, u.div.Load())
	}
	v := c.vals[depID]
	pos := time.Duration(v.pos)*time.Millisecond + max(now.Sub(c.at), 0)
	var w time.Duration
	if rpm > 0 {
		w = slideWait(v.r, v.pr, rpm-1-d.req.Load()-d.freq.Load(), pos)
	}
	if tpm > 0 {
		w = max(w, slideWait(v.t, v.pt, max(tpm-est, 0)-d.tok.Load()-d.ftok.Load(), pos))
	}
	return w
}

// slideWait is how long until usageReadLua's estimate, round(cur +
// prev*(1-f)) with f the part of the current minute gone (pos into it),
// is at most lim; at the minute's end cur becomes the previous minute.
func slideWait(cur, prev, lim int64, pos time.Duration) time.Duration {
	if lim < 0 { // unwritten counts alone fill it: written, they leave within two minutes
		return max(2*time.Minute-pos, time.Second)
	}
	for pos >= time.Minute { // the cache is from an earlier minute
		cur, prev, pos = 0, cur, pos-time.Minute
	}
	bound := float64(lim) + 0.5 // round(x) <= lim while x < bound
	if room := bound - float64(cur); room > 0 {
		if float64(prev)*(1-pos.Seconds()/60) < room {
			return 0
		}
		at := time.Duration((1 - room/float64(prev)) * float64(time.Minute))
		return at - pos + time.Millisecond
	}
	at := time.Duration((1 - bound/float64(cur)) * float64(time.Minute))
	return time.Minute - pos + at + time.Millisecond
}

// flush writes every deployment's unwritten counts in one pipeline. A
// write that fails stays in flight and is sent again as it was (same seq:
// Redis applies it once) while its counts are younger than a minute (older
// ones no longer describe the current minute and are dropped); the counts
// recorded meanwhile wait until it is acknowledged.
func (u *RedisUsage) flush(ctx context.Context) {
	var items []*depUsage
	var calls []redisscript.Call
	now := u.clock().UnixNano()
	u.deps.Range(func(_, v any) bool {
		d := v.(*depUsage)
		if d.fseq != 0 && now-d.fsince >= int64(Window) {
			u.obs.OnDropped(int(max(d.freq.Swap(0), 0)))
			d.ftok.Store(0)
			d.fseq = 0
		}
		if d.fseq == 0 {
			if d.req.Load() == 0 && d.tok.Load() == 0 {
				d.since.Store(0) // nothing unwritten: a request and its take-back (Unrecord) cancelled out
				return true
			}
			u.seq++
			d.fseq, d.fsince = u.seq, d.since.Swap(0)
			if d.fsince == 0 { // a Record between its count and its since
				d.fsince = now
			}
			d.freq.Store(d.req.Swap(0))
			d.ftok.Store(d.tok.Swap(0))
		}
		items = append(items, d)
		calls = append(calls, redisscript.Call{Keys: d.keys, Args: []any{d.freq.Load(), d.ftok.Load(), d.fseq}})
		return true
	})
	if len(items) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, u.timeout)
	defer cancel()
	cmds := redisscript.EvalPipelined(ctx, u.client, usageRecordScript, calls)
	for i, d := range items {
		if cmds[i].Err() == nil {
			d.fseq = 0
			d.freq.Store(0)
			d.ftok.Store(0)
		}
	}
}

// refresh reads every known deployment's cluster-wide counts. The cache is
// replaced only by a complete read; a failed one lets it go stale, which
// switches Usage to the local counts.
func (u *RedisUsage) refresh(ctx context.Context) {
	var ids []string
	var calls []redisscript.Call
	u.deps.Range(func(k, v any) bool {
		ids = append(ids, k.(string))
		calls = append(calls, redisscript.Call{Keys: v.(*depUsage).keys})
		return true
	})
	if len(ids) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, u.timeout)
	defer cancel()
	cmds := redisscript.EvalPipelined(ctx, u.client, usageReadScript, calls)
	vals := make(map[string]usageVals, len(ids))
	for i, id := range ids {
		v, err := cmds[i].Int64Slice()
		if err != nil || len(v) != 7 {
			u.obs.OnFallback("usage")
			return
		}
		vals[id] = usageVals{req: v[0], tok: v[1], r: v[2], t: v[3], pr: v[4], pt: v[5], pos: v[6]}
	}
	u.cache.Store(&usageCache{at: u.clock(), vals: vals})
}

// Close writes the unwritten counts, bounded by ctx; the writer calls it
// when it stops.
func (u *RedisUsage) Close(ctx context.Context) error {
	u.flush(ctx)
	lost := 0
	u.deps.Range(func(_, v any) bool {
		d := v.(*depUsage)
		lost += int(max(d.req.Swap(0), 0) + max(d.freq.Swap(0), 0))
		return true
	})
	if lost > 0 {
		u.obs.OnDropped(lost)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return errUnwritten
	}
	return nil
}
