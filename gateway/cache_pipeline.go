package gateway

// The response cache in the pipeline (SPEC 2.7, 18): the entries read in
// Begin's round trip (Redis) or from the node's store, the lookup after the
// allowlist and the pool (so 403 and 404 come first), a hit answered in the
// client's format and mode, and a complete answer stored once it has
// reached the client, in the node's store and through the writer in Redis.
// Identical requests in flight coalesce: on one node through cache.Group,
// across nodes through the lease Begin takes or finds (edge: Coalesce,
// Await). Purges and the counters that reach every node are in
// cache_admin.go.

import (
	"context"
	"errors"
	"net/http"
	"time"

	"switchyard/cache"
	"switchyard/catalog"
	"switchyard/edge"
	"switchyard/providers"
	"switchyard/routing/tier"
)

// cacheView computes, before Begin (SPEC 2.3: in process, from the
// snapshot), whether the request is cacheable and the entries Begin is to
// read in its round trip: the model's, or a tier alias's easy and hard
// ones (the tier is decided after Begin).
func (cl *call) cacheView(route *catalog.TierRoute, p *edge.PinQuery) {
	s := cl.s
	if s.cachePolicy == nil {
		return
	}
	var v *cacheView
	if route != nil {
		v = newCacheView(s.cachePolicy, cl.team, cl.req, cl.c.Request.Header, true, route.Easy, route.Hard)
	} else {
		v = newCacheView(s.cachePolicy, cl.team, cl.req, cl.c.Request.Header, false, cl.req.Model)
	}
	if v == nil {
		return // not cacheable: no cache header
	}
	cl.cv = v
	v.models[0] = cl.req.Model
	if route != nil {
		v.models = [2]string{route.Easy, route.Hard}
	}
	if v.dir.Read() {
		p.Cache[0] = v.name(0)
		if route != nil {
			p.Cache[1] = v.name(1)
		}
		// the lease of the entry, taken or found in the same round trip
		// (SPEC 18): a tier alias's is the entry of the tier it goes to
		// as far as that is known before Begin (cacheLookup ends it when
		// the session's pin moves the request to the other tier)
		if p.Coalesce = cl.coalesces(); p.Coalesce && route != nil && cl.preTier(route) == tier.Hard {
			p.Lease, v.lease = 1, 1
		}
	}
}

// coalesces reports whether the request may follow an identical one in
// flight instead of calling the upstream (SPEC 18): coalescing is on and
// its directives let it read and call an upstream.
func (cl *call) coalesces() bool {
	s := cl.s
	return cl.cv.dir.Read() && !cl.cv.dir.OnlyIfCached && s.cfg().Cache.Coalesce && s.cacheGroup != nil
}

// cacheLookup answers the request from the cache when it can: the entry
// Begin read from Redis, else the node's own store. answered reports that
// the request is done (a hit, or only-if-cached's 504). Otherwise the
// answer will be stored under the routed tier's key.
func (cl *call) cacheLookup() (answered bool) {
	v := cl.cv
	if v == nil {
		return false
	}
	s := cl.s
	tier, slot := "", 0
	if v.alias && cl.verdict != nil {
		tier = cl.verdict.Tier.String()
		if tier == "hard" {
			slot = 1
		}
	}
	cl.cacheKey, cl.cacheModel, v.slot = v.key(tier), v.models[slot], slot
	if slot != v.lease && cl.begun.Coalesce != edge.CoalesceNone {
		// the session's tier pin moved a tier alias's request off the
		// entry Begin leased: end that lease now (its followers, if any,
		// go on alone) and coalesce on this node alone
		if d, ok := s.Edge.(edge.LeaseDropper); ok {
			d.DropLease(&cl.begun)
		}
		cl.begun.Coalesce = edge.CoalesceNone
	}
	now := time.Now()
	if v.dir.Read() {
		b, ok := []byte(cl.begun.Pins.Cache[slot]), cl.begun.Pins.Cache[slot] != ""
		shared := ok
		if !ok && cl.begun.Local {
			// the node's copy answers only when Redis did not: with Redis
			// up, an entry it lacks was purged (or is not written yet), and
			// no node serves a purged entry (SPEC 18)
			b, ok = s.cacheLocal.Get(cl.cacheKey, now)
		}
		if ok {
			if served, _ := cl.serveStored(b, now, cacheHit, shared); served {
				return true
			}
		}
	}
	if cl.coalesces() {
		// one coalesce_wait for the request, whichever leaders it follows:
		// one on another node, then one that began on this node meanwhile
		until := time.Now().Add(s.cfg().Cache.CoalesceWait)
		if cl.begun.Coalesce == edge.CoalesceFollow && !s.cacheGroup.InFlight(cl.cacheKey) && cl.awaitLeader(until) {
			return true // another node's request called the upstream (SPEC 18)
		}
		// an identical request in flight on this node: follow its answer
		// instead of calling the upstream again (SPEC 18)
		flight, fl := s.cacheGroup.Lead(cl.cacheKey, cl.req.Stream)
		if fl != nil && time.Until(until) <= 0 {
			fl.Leave() // its whole coalesce_wait spent already: go on alone
			cl.alone("node", context.DeadlineExceeded)
		} else if fl != nil && cl.req.Stream {
			if cl.followStream(fl, time.Until(until)) {
				if fl.Whole() { // not an answer too large to keep: only its finish
					cl.passLease(fl.Entry())
				}
				return true
			}
		} else if fl != nil {
			ctx, cancel := context.WithDeadline(cl.ctx, until)
			w0 := time.Now()
			e, err := fl.Wait(ctx)
			cl.upstream += time.Since(w0) // waiting on the leader's upstream call, not the gateway's own time
			cancel()
			if err == nil && e != nil && cl.serveEntry(e, time.Now(), cacheCoalesced) {
				cl.passLease(e)
				return true
			}
			cl.alone("node", err) // the leader failed or took too long: go on alone
		}
		cl.flight = flight
	}
	s.Metrics.CacheRequests.WithLabelValues(cl.model, v.dir.Result()).Inc()
	s.cacheCount(cl.team.Name, cl.cacheModel, v.dir.Result(), 0, 0)
	if v.dir.OnlyIfCached {
		cl.hdr.str("X-Switchyard-Cache", cacheMiss)
		cl.fail(errCacheMiss())
		return true
	}
	cl.hdr.str("X-Switchyard-Cache", v.dir.Result())
	return false
}

// awaitLeader waits, until until (cache.coalesce_wait), for the answer of the
// request on another node that holds the entry's lease, and serves it as a
// coalesced answer (accounted like a hit). It reports false when the
// leader failed or was cut off, its lease ran out, the wait ended or Redis
// did not answer: the request then goes on alone (it does not look for
// the lease again).
func (cl *call) awaitLeader(until time.Time) bool {
	s := cl.s
	start := time.Now()
	ctx, cancel := context.WithDeadline(cl.ctx, until)
	raw, err := s.Edge.Await(ctx, &cl.begun)
	cancel()
	cl.upstream += time.Since(start) // waiting on the leader's upstream call
	if err == nil {
		var served bool
		if served, err = cl.serveStored([]byte(raw), time.Now(), cacheCoalesced, true); served {
			return true
		}
	}
	cl.alone("cluster", err)
	if cl.ctx.Err() == nil {
		s.Logger.Debug("coalescing follower goes on alone: the leader on another node did not share its answer",
			"request_id", cl.reqID, "team", cl.team.Name, "model", cl.cacheModel, "waited", time.Since(start), "error", err)
	}
	return false
}

// alone counts a follower that goes on alone (switchyard_cache_followers_
// alone_total), its leader on this node or another (where), for the reason
// err gives; not when its own client is gone (it goes nowhere).
func (cl *call) alone(where string, err error) {
	if cl.ctx.Err() != nil {
		return
	}
	reason := "error" // Redis did not answer, or the entry was not usable
	switch {
	case errors.Is(err, cache.ErrLeaderFailed), errors.Is(err, edge.ErrLeaderFailed), errors.Is(err, edge.ErrLeaseGone):
		reason = "leader_failed"
	case errors.Is(err, context.DeadlineExceeded):
		reason = "wait_ended"
	}
	cl.s.Metrics.CacheAlone.WithLabelValues(where, reason).Inc()
}

// serveStored answers with an encoded entry (result hit or coalesced)
// when it decodes, the directives accept its age and no purge removed it
// since it was stored; served false leaves the request to go on (err: the
// entry did not decode). An entry read from Redis (shared) that it served
// is kept in the node's store too, for the rest of its TTL: while Redis is
// down every node that served an entry answers it from its own copy, not
// only the node that stored it (SPEC 18).
func (cl *call) serveStored(b []byte, now time.Time, result string, shared bool) (served bool, err error) {
	e, err := cache.Decode(b)
	if err != nil || !cl.cv.usable(e, now) || cl.s.cachePurges.Purged(cl.team.Name, e.Model, e.StoredAt) {
		return false, err
	}
	if !cl.serveEntry(e, now, result) {
		return false, nil
	}
	if left := cl.cv.ttl - now.Sub(e.StoredAt); shared && left > 0 {
		cl.s.cacheLocal.Keep(cl.cacheKey, b, cl.team.Name, cl.cacheModel, now, left)
	}
	return true, nil
}

// passLease hands an answer this request followed on its node to the
// writer as its own entry when the request holds the entry's lease (SPEC
// 18): ending the lease with the entry wakes the other nodes' followers to
// read it instead of releasing them to call the upstream. The local leader
// stores the same entry; the writer keeps one write per key.
func (cl *call) passLease(e *cache.Entry) {
	if e == nil || cl.begun.Coalesce != edge.CoalesceLead || !cl.cv.dir.Store() || cl.purgedSinceStart() {
		return
	}
	if b, ok := e.EncodeLimited(cl.s.cfg().Cache.MaxEntryBytes); ok {
		cl.out.CacheKey, cl.out.CacheValue, cl.out.CacheTTL = cl.cv.name(cl.cv.slot), b, cl.cv.ttl
	}
}

// serveEntry writes a stored answer, or another request's (result hit or
// coalesced, SPEC 18): fresh id and created, the client's format and mode,
// X-Switchyard-Cache and Age. The request is charged no tokens and no cost
// (Finish refunds its reservations); the audit and the metrics say what it
// saved.
func (cl *call) serveEntry(e *cache.Entry, now time.Time, result string) bool {
	s := cl.s
	body, ctype, err := renderCached(e, cacheTarget(cl.req, cl.cv, now, cl.responsesHook()))
	if err != nil {
		return false // not renderable for this client: call the upstream
	}
	cl.contentLength(len(body))
	cl.hdr.millis("X-Switchyard-Overhead-Ms", time.Since(cl.start)-cl.upstream) // SPEC 12.3, as on any routed answer
	h := cl.c.Writer.Header()
	cl.hdr.flush(h)
	setCacheHeaders(h, result, e, now)
	h["X-Switchyard-Cost-Usd"] = []string{"0"}
	h["Content-Type"] = []string{ctype}
	if ctype == "text/event-stream" {
		h["Cache-Control"] = []string{"no-cache"}
	}
	cl.entry.Status, cl.entry.Cached = http.StatusOK, true
	tokens, saved := cl.savedBy(e)
	s.Metrics.CacheRequests.WithLabelValues(cl.model, result).Inc()
	s.cacheCount(cl.team.Name, e.Model, result, tokens, saved)
	cl.c.Writer.WriteHeader(http.StatusOK)
	_, _ = cl.c.Writer.Write(body)
	return true
}

// savedBy records in the audit entry and the metrics what answering with e
// instead of calling the upstream saved (SPEC 18: a hit, or a coalesced
// follower, accounted like one): the tokens and what the answer cost, its
// cached prompt tokens at cached_input as it was charged (SPEC 10.2).
func (cl *call) savedBy(e *cache.Entry) (tokens int64, usd float64) {
	s := cl.s
	cl.entry.RoutedModel, cl.entry.Deployment = e.Model, e.Deployment
	cl.entry.PromptTokens, cl.entry.CompletionTokens = e.Usage.PromptTokens, e.Usage.CompletionTokens
	if d := cl.snap.Deployments[e.Deployment]; d != nil {
		usd = d.Cost(e.Usage.PromptTokens, e.Usage.CachedTokens, 0, e.Usage.CompletionTokens)
	}
	cl.entry.SavedUSD = usd
	tokens = int64(e.Usage.PromptTokens + e.Usage.CompletionTokens)
	s.Metrics.CacheSavedTokens.Add(float64(tokens))
	s.Metrics.CacheSavedUSD.Add(usd)
	return tokens, usd
}

// responsesHook is what a Responses answer served from the cache hands its
// rendered object to, as a live one does: with store true it is stored
// under the hit's own new id (SPEC 18, 10.1). nil for other formats.
func (cl *call) responsesHook() providers.ResponsesDone {
	if cl.rs == nil {
		return nil
	}
	return cl.rs.responsesDone
}

// cacheStore keeps a complete answer (SPEC 18: status 200, not degraded,
// a stored finish reason, under max_entry_bytes) in the node's store.
func (cl *call) cacheStore(e *cache.Entry, b []byte) {
	if cl.cv == nil || e == nil || b == nil || !cl.cv.dir.Store() || cl.purgedSinceStart() {
		return
	}
	cl.s.cacheLocal.Put(cl.cacheKey, b, cl.team.Name, cl.cacheModel, time.Now(), cl.cv.ttl)
	cl.s.cacheStats.stored(cl.team.Name, cl.cacheModel, len(b))
	// and, through the writer, in Redis for every replica (SPEC 18)
	cl.out.CacheKey, cl.out.CacheValue, cl.out.CacheTTL = cl.cv.name(cl.cv.slot), b, cl.cv.ttl
}

// purgedSinceStart reports whether a purge of the request's scope came
// after the request began (SPEC 18): its answer, though it completes after
// the purge (and so carries a later stored time, which nothing would
// refuse), comes from before it, and is stored nowhere.
func (cl *call) purgedSinceStart() bool {
	return cl.s.cachePurges.Purged(cl.team.Name, cl.cacheModel, cl.start)
}

// cacheMeta is what an entry records of the answer that fills it.
func (cl *call) cacheMeta(d *catalog.Deployment) cache.Meta {
	m := cache.Meta{Model: d.Model, Deployment: d.ID, Now: time.Now()}
	if cl.alias != "" && cl.verdict != nil {
		m.Tier = cl.verdict.Tier.String()
	}
	return m
}

// followStream relays the leader's answer to a streaming follower event by
// event, rendered in this client's format, as it arrives (SPEC 18). It
// reports whether the request is answered: false when the leader failed or
// was too slow before any byte reached this client, which then goes on
// alone; a leader lost after that ends this stream with an error event.
// wait bounds the wait for the first event (what is left of the request's
// coalesce_wait).
func (cl *call) followStream(fl *cache.Follower, wait time.Duration) bool {
	s := cl.s
	r, err := cache.NewRenderer(cacheTarget(cl.req, cl.cv, time.Now(), cl.responsesHook()), cl.model, cl.promptTokens)
	if err != nil {
		fl.Leave()
		cl.alone("node", err)
		return false
	}
	w := cl.c.Writer
	ew := s.newEventWriter(w, cl.end)
	w0 := time.Now()
	write := func(b []byte) error {
		if !w.Written() {
			// until the leader's first delta, it waited on the leader's
			// upstream call, not on the gateway (SPEC 12.3)
			cl.upstream += time.Since(w0)
			cl.hdr.millis("X-Switchyard-Overhead-Ms", time.Since(cl.start)-cl.upstream)
			// the headers go out with the first event, as soon as the
			// leader's first delta is here: what a hit carries (SPEC 18,
			// 12.3). A sync leader's follower streams its entry; a
			// streaming leader's answer is live, Age 0, and served by the
			// public model of the key the two share: an answer served by
			// any other (a fallback: degraded) is never shared, its
			// followers released before its first delta (SPEC 18).
			now := time.Now()
			e := fl.Entry()
			if e == nil {
				e = &cache.Entry{Model: cl.cacheModel, StoredAt: now}
			}
			h := w.Header()
			cl.hdr.flush(h)
			setCacheHeaders(h, cacheCoalesced, e, now)
			h["Content-Type"] = []string{"text/event-stream"}
			h["Cache-Control"] = []string{"no-cache"}
			h["X-Accel-Buffering"] = []string{"no"} // a live stream, as the leader's relay
			w.WriteHeader(http.StatusOK)
		}
		if err := ew.write(b); err != nil {
			return err
		}
		cl.rs.relayed(b)
		return nil
	}
	wrote, err := followStream(cl.ctx, wait, fl, r, write)
	if !wrote {
		cl.upstream += time.Since(w0) // the wait on the leader's upstream call
		cl.alone("node", err)
		return false
	}
	cl.entry.Status, cl.entry.Cached = http.StatusOK, true
	var tokens int64
	var saved float64
	if e := fl.Entry(); err == nil && e != nil {
		// the whole answer reached this client: it saved what a hit saves
		tokens, saved = cl.savedBy(e)
	}
	s.Metrics.CacheRequests.WithLabelValues(cl.model, cacheCoalesced).Inc()
	s.cacheCount(cl.team.Name, cl.cacheModel, cacheCoalesced, tokens, saved)
	if err != nil {
		cl.entry.Error = "the coalesced answer it followed ended early: " + err.Error()
		e := &apiError{Status: http.StatusBadGateway, Type: "upstream_error", Message: "the answer this request followed ended before it was complete"}
		_ = ew.write(cl.streamError(e))
	}
	return true
}
