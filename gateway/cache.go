package gateway

// The response cache's hooks into the pipeline (SPEC 18). They hold no
// state of their own and know nothing of Redis: the pipeline computes a
// cacheView before edge.State.Begin (SPEC 2.3: the key is computed in
// process from the catalog snapshot), the Begin round trip reads the
// entry, and these helpers render a hit, relay a coalesced follower, and
// tap a leader's answer into an entry and its followers.

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"switchyard/cache"
	"switchyard/catalog"
	"switchyard/edge"
	"switchyard/providers"
	"switchyard/wire"
)

// The X-Switchyard-Cache values (SPEC 18).
const (
	cacheHit       = "hit"
	cacheMiss      = "miss"
	cacheCoalesced = "coalesced"
	cacheBypass    = "bypass"
)

// cacheView is what the response cache needs of one cacheable request.
type cacheView struct {
	canon *cache.Canon
	dir   cache.Directives
	ttl   time.Duration
	// keys holds the entry key: keys[0] for a plain model; for a tier
	// alias keys[0] is the easy tier's and keys[1] the hard tier's, and the
	// Begin script reads the one the session's tier pin leaves it on.
	keys [2]cache.Key
	// models are the public models the keys answer for (an alias's easy
	// and hard targets): the entry's name carries it (edge.CacheKey).
	models [2]string
	names  [2]string // the entries' names in Redis, made once (name)
	slot   int       // which key the request was routed to (cacheLookup)
	lease  int       // which key Begin's coalescing lease is about (edge.PinQuery.Lease)
	alias  bool
}

// name is the Redis name of entry i (edge.CacheKey), made on first use:
// Begin reads it and the writer stores under it.
func (v *cacheView) name(i int) string {
	if v.names[i] == "" {
		v.names[i] = edge.CacheKey(v.models[i], v.keys[i].String())
	}
	return v.names[i]
}

// newCacheView returns the request's cache view, or nil when the request
// is not cacheable (the cache is off for its team or model, the operation
// or its fields exclude it): such a request carries no cache header.
// targets are the public models it may be served by: the model itself, or
// a tier alias's easy and hard targets (alias true). The team's own switch
// is the catalog's (the request's team record).
func newCacheView(p *cache.Policy, t *catalog.Team, req *wire.Request, h http.Header, alias bool, targets ...string) *cacheView {
	if p == nil || !p.Enabled(t.Cache, targets...) {
		return nil
	}
	team := t.Name
	canon, err := cache.ParseRequest(req, team) // the body wire.Parse validated, walked once more
	if err != nil {
		return nil
	}
	v := &cacheView{canon: canon, dir: cache.ParseDirectives(h.Values("Cache-Control")), ttl: p.TTL(targets...), alias: alias}
	if alias {
		v.keys = [2]cache.Key{canon.Key(team, "easy"), canon.Key(team, "hard")}
	} else {
		v.keys[0] = canon.Key(team, "")
	}
	return v
}

// key is the entry key for the tier the request was routed to ("" or
// "easy"/"hard" for an alias).
func (v *cacheView) key(tier string) cache.Key {
	if v.alias && tier == "hard" {
		return v.keys[1]
	}
	return v.keys[0]
}

// usable reports whether a looked-up entry may answer: the directives allow
// reading and its age is within max-age.
func (v *cacheView) usable(e *cache.Entry, now time.Time) bool {
	return e != nil && v.dir.Read() && v.dir.Fresh(time.Duration(e.Age(now))*time.Second)
}

// cacheTarget is how this client wants a replayed answer.
func cacheTarget(req *wire.Request, v *cacheView, now time.Time, done providers.ResponsesDone) cache.Target {
	return cache.Target{Format: req.Format, Stream: req.Stream, IncludeUsage: req.IncludeUsage, Client: req,
		Done: done, EncodingFormat: v.canon.EncodingFormat, Now: now}
}

// setCacheHeaders writes X-Switchyard-Cache and, for a hit or a coalesced
// answer, Age, X-Switchyard-Model and X-Switchyard-Attempts: 0 (SPEC 18,
// 12.3). e is nil for a miss or a bypass.
func setCacheHeaders(h http.Header, result string, e *cache.Entry, now time.Time) {
	h["X-Switchyard-Cache"] = []string{result}
	if e == nil || (result != cacheHit && result != cacheCoalesced) {
		return
	}
	h["Age"] = []string{strconv.FormatInt(e.Age(now), 10)}
	h["X-Switchyard-Model"] = []string{e.Model}
	h["X-Switchyard-Attempts"] = []string{"0"}
}

// renderCached renders a hit for the client: the body and its
// Content-Type (a whole SSE stream for a stream client).
func renderCached(e *cache.Entry, t cache.Target) (body []byte, contentType string, err error) {
	body, err = cache.Render(e, t)
	if t.Stream {
		return body, "text/event-stream", err
	}
	return body, "application/json", err
}

// errCacheMiss answers only-if-cached on a miss (SPEC 18).
func errCacheMiss() *apiError {
	return &apiError{Status: http.StatusGatewayTimeout, Type: "cache_miss", Code: "cache_miss",
		Message: "no cached answer for this request, and Cache-Control: only-if-cached forbids calling an upstream"}
}

// followStream relays a coalesced streaming follower: each delta the
// leader publishes is rendered in this client's format and handed to write
// (which writes and flushes one event) as it arrives. The wait for the
// first delta is bounded by wait (cache.coalesce_wait); after that the
// stream runs under ctx like any other. wrote reports whether any byte went
// to the client: a follower released before that (ErrLeaderFailed,
// ErrTooSlow, its wait over) goes on as an independent request; one
// released after it ends its stream with an error, like any stream cut
// after its first byte (SPEC 7, 18).
func followStream(ctx context.Context, wait time.Duration, fl *cache.Follower, r *cache.Renderer, write func([]byte) error) (wrote bool, err error) {
	first, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	next := first
	for {
		d, err := fl.Next(next)
		next = ctx
		if errors.Is(err, io.EOF) {
			return wrote, nil
		}
		if err != nil {
			fl.Leave()
			return wrote, err
		}
		if b := r.Render(d); len(b) > 0 {
			wrote = true
			if err := write(b); err != nil {
				fl.Leave()
				return wrote, err
			}
		}
	}
}

// cacheTap watches a leader's answer on its way to the client: a stream's
// framed events become deltas for the followers and the entry to store.
type cacheTap struct {
	acc    *cache.Accumulator
	flight *cache.Flight // nil without coalescing
	ds     []cache.Delta
}

func newCacheTap(format wire.Format, maxEntryBytes int64, flight *cache.Flight) *cacheTap {
	return &cacheTap{acc: cache.NewAccumulator(format, maxEntryBytes), flight: flight}
}

// relayed is called with each slice of framed events written to the
// client. A stream that turns out not shareable (an error event, content
// the entry cannot replay) releases its followers at once.
func (t *cacheTap) relayed(frames []byte) {
	t.ds = t.acc.Add(frames, t.ds[:0])
	if t.flight == nil {
		return
	}
	if !t.acc.OK() {
		t.flight.Fail()
		return
	}
	for _, d := range t.ds {
		t.flight.Publish(d)
	}
}

// finish ends the stream: the entry when it is storable (its terminal event
// arrived, complete and successful), encoded under maxEntryBytes and handed
// to store (may be nil), then the flight completed; otherwise nil, and the
// followers released. u is the upstream's usage (EventStream.Usage).
// degraded answers are never stored. An answer complete and successful but
// too large to keep is not stored either, yet its streaming followers,
// handed every delta, end with its finish (cache.Flight.CompleteUnkept),
// not with an error after the whole answer.
func (t *cacheTap) finish(m cache.Meta, u cache.Usage, maxEntryBytes int64, degraded bool, store func(*cache.Entry, []byte)) (*cache.Entry, []byte) {
	if degraded {
		t.fail()
		return nil, nil
	}
	e, err := t.acc.Entry(m, u)
	if err != nil {
		if f, ferr := t.acc.Finished(m, u); ferr == nil && t.flight != nil {
			t.flight.CompleteUnkept(f)
		}
		t.fail() // a no-op after CompleteUnkept
		return nil, nil
	}
	return complete(e, maxEntryBytes, t.flight, store)
}

// complete encodes a storable entry under maxEntryBytes and hands it to
// store before it completes the flight: a request that finds the flight
// ended then finds the entry in the node's store, never neither (it would
// call the upstream again). An entry too large to store still completes
// the flight: its followers are answered.
func complete(e *cache.Entry, maxEntryBytes int64, flight *cache.Flight, store func(*cache.Entry, []byte)) (*cache.Entry, []byte) {
	b, ok := e.EncodeLimited(maxEntryBytes)
	if ok && store != nil {
		store(e, b)
	}
	if flight != nil {
		flight.Complete(e)
	}
	if !ok {
		return nil, nil
	}
	return e, b
}

// fail releases the followers: the leader failed or was cut off. It is
// safe to defer.
func (t *cacheTap) fail() {
	if t.flight != nil {
		t.flight.Fail()
	}
}

// syncEntry builds the entry of a sync answer (status 200, not degraded),
// hands it to store (may be nil) and completes the flight (complete); nil,
// nil when it is not storable.
func syncEntry(req *wire.Request, body []byte, m cache.Meta, maxEntryBytes int64, flight *cache.Flight, store func(*cache.Entry, []byte)) (*cache.Entry, []byte) {
	e, err := cache.FromBody(req.Op, req.Format, body, m)
	if err != nil {
		if flight != nil {
			flight.Fail()
		}
		return nil, nil
	}
	return complete(e, maxEntryBytes, flight, store)
}

// cacheUsage is a provider usage as the cache counts it.
func cacheUsage(u providers.Usage) cache.Usage {
	return cache.Usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, CachedTokens: u.CachedTokens}
}
