package edge

// The end of a request in the Redis edge state: Finish folds the outcome
// into its team's pending writes for the one writer, and Release frees a
// shared slot before the answer's last byte leaves.

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"switchyard/ratelimit"
)

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
	tk := &b.t
	actual := int64(0)
	cost := 0.0 // the real cost a budget is charged
	if o.Served {
		actual = int64(o.PromptTokens + o.CompletionTokens)
		cost = max(0, o.CostUSD)
	}
	w := finishWrite{}
	if tk.admitted && tk.local {
		if !tk.released {
			r.local.Release(tk.lt)
		}
		if tk.lt.Slot != "" {
			// the slot an admission script carried to Redis is freed there too
			if rw, ok := ts.endLocalSlot(r.node + ":" + tk.lt.Slot); ok {
				if visit, urgent := ts.add(t, &rw, r.w, r.cfg.MaxPins); visit {
					r.w.markDirty(ts, urgent)
				}
			}
		}
		r.local.Reconcile(tk.lt, actual, cost)
		// Redis reserved nothing: it is owed the whole cost at every level
		// with a budget (SPEC 9: replayed)
		if t.Budget.USD > 0 {
			w.usd = cost
		}
		if ac := tk.remote; ac != nil {
			if t.MaxParallel > 0 {
				w.slot = ac.slot
			}
		}
		for j := range 2 {
			if b.lv == nil {
				break
			}
			lv := &b.lv[j]
			if !lv.limited() {
				continue
			}
			sw := subWrite{lv: *lv, keys: newLevelKeys(ts.keys.base(), lv)}
			if lv.Limits.Budget.USD > 0 {
				sw.usd = cost
			}
			if ac := tk.remote; ac != nil && lv.Limits.MaxParallel > 0 {
				sw.slot = ac.slot
			}
			if sw.usd != 0 || sw.slot != "" {
				w.subs[w.nsub] = sw
				w.nsub++
			}
		}
	} else if tk.admitted {
		now := r.cfg.Clock().UnixNano()
		if t.Budget.USD > 0 {
			w.spent = cost > 0
			code := ratelimit.PeriodCode(ratelimit.BudgetPeriod(t.Budget))
			w.usd, w.settled = budgetDelta(cost, tk.usd, tk.window, now, code)
			if cost > 0 {
				r.local.Spend(t, nil, cost) // the fallback knows this node's share of the spend
			}
		}
		if tk.usd > 0 {
			// no longer held (sharedSpend) once spent above: in this order
			// the fallback may count it twice for an instant, never not at all
			ts.heldOf().team.Add(-nanoUSD(tk.usd))
		}
		if tk.teamSlot {
			w.slot = tk.slot
		}
		if t.TPM > 0 {
			w.delta, w.end = actual-tk.reserved, tk.end
		}
		for j := range tk.nsub {
			st := &tk.subs[j]
			sw := subWrite{lv: st.lv, keys: st.keys}
			if st.held {
				sw.held = nanoUSD(st.usd)
			}
			if st.slot {
				sw.slot = tk.slot
			}
			if st.lv.Limits.TPM > 0 {
				sw.delta, sw.end = actual-st.reserved, st.end
			}
			if st.lv.Limits.Budget.USD > 0 {
				sw.spent = cost > 0
				sw.usd, sw.settled = budgetDelta(cost, st.usd, st.window, now, budgetCode(&st.lv))
				if cost > 0 {
					r.local.Spend(t, &ratelimit.Level{Key: st.keys.base, Limits: st.lv.Limits}, cost)
				}
			}
			w.subs[w.nsub] = sw
			w.nsub++
		}
	}
	var tierKey, depKey string
	tierTTL, depTTL := pinLife(o.TierTTL), pinLife(o.DepTTL)
	if s := b.q.Session; s != "" {
		if o.TierPin != "" && b.q.TierAlias != "" {
			tierKey = r.keepPin(b, tierPinKey(s, b.q.TierAlias), o.TierPin, b.Pins.Tier, tierTTL)
		}
		if o.DepPin != "" && o.DepModel != "" {
			depKey = r.keepPin(b, depPinKey(s, o.DepModel), o.DepPin, b.Deployment(o.DepModel), depTTL)
		}
	}
	w.tierKey, w.tier, w.tierTTL = tierKey, o.TierPin, tierTTL
	w.depKey, w.dep, w.depTTL = depKey, o.DepPin, depTTL
	if o.CacheKey != "" && o.CacheTTL > 0 {
		w.cacheKey, w.cacheVal, w.cacheTTL = o.CacheKey, string(o.CacheValue), o.CacheTTL
	}
	if b.tok != "" {
		w.lease = b.endLease(o)
	}
	if o.Served && o.Deployment != "" {
		w.dep0, w.tokens, w.cost = o.Deployment, actual, o.CostUSD
	}
	if k, s, ok := rowOf(o, r.cfg.Clock()); ok {
		w.lvRow, w.lvSums, w.lvOK = k, s, true
	}
	lazy := w.lazy()
	visit, urgent := ts.add(t, &w, r.w, r.cfg.MaxPins)
	if o.Audit != nil {
		r.ring.Record(o.Audit)
		r.w.audit(o.Audit)
	}
	switch {
	case !visit:
	case lazy && !urgent:
		r.w.markLazy(ts)
	default:
		r.w.markDirty(ts, urgent)
	}
}

// lazy reports whether w only settles what its request reserved at
// admission (SPEC 3: the tokens and the budget it used, more or less than
// its reservation) and reports usage, so the writer may hold it up to
// lazyEvery: other nodes' admissions already count the reservation, and
// what the settlement moves is the error of the estimate. A slot release,
// a pin, a cache entry or a lease end, which another node's next request
// looks for, goes out on the writer's next tick.
func (w *finishWrite) lazy() bool {
	return w.slot == "" && w.tierKey == "" && w.depKey == "" && w.cacheKey == "" && w.lease.key == "" &&
		(w.nsub == 0 || w.subs[0].slot == "") && (w.nsub < 2 || w.subs[1].slot == "")
}

// pinLife is the TTL a pin kept for ttl of inactivity is set with: 9/8 of
// it. keepPin skips renewing a pin set under a ninth of that ago, so every
// pin lives at least ttl after its session's last request (SPEC 8: it
// expires after session_ttl of inactivity) and at most an eighth more;
// set for ttl, a skipped renewal left it to expire a quarter early.
func pinLife(ttl time.Duration) time.Duration { return ttl + ttl/8 }

// keepPin stores the pin key = value in the local copy and returns the key
// the writer is to send to Redis, or "" when Redis already has it: Begin
// read the same value there (read), and this node wrote it under a ninth
// of its TTL ago (then neither copy is touched, so the local one keeps the
// expiry it has in Redis). A busy session costs one renewal per ninth of
// the TTL instead of a write per request (SPEC 9: only the writes the
// request needs).
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

// Release implements State: one ZREM of the request's shared slot at
// each level holding it (one pipeline), bounded by redis.timeout; on
// success Finish has no release left to queue and the writer stops
// renewing the lease.
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
	if !r.sharedFor(ts.keys.base()) {
		return
	}
	var sets [3]string
	n := 0
	if tk.teamSlot {
		sets[n] = ts.keys.par()
		n++
	}
	for j := range tk.nsub {
		if tk.subs[j].slot {
			sets[n] = tk.subs[j].keys.par
			n++
		}
	}
	cctx, cancel := context.WithTimeout(ctx, r.timeout)
	var err error
	if n == 1 {
		err = r.c.ZRem(cctx, sets[0], tk.slot).Err()
	} else {
		_, err = r.c.Pipelined(cctx, func(p redis.Pipeliner) error {
			for _, k := range sets[:n] {
				p.ZRem(cctx, k, tk.slot)
			}
			return nil
		})
	}
	cancel()
	if err != nil {
		return // Finish queues it for the writer
	}
	ts.unhold(tk)
	tk.slot = ""
}
