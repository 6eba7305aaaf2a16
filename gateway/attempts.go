package gateway

import (
	"context"
	"errors"
	"io"
	"net/http"
	"time"

	"switchyard/catalog"
	"switchyard/edge"
	"switchyard/providers"
	"switchyard/redact"
	"switchyard/routing"
	"switchyard/telemetry"
	"switchyard/tracing"
)

// errUpstreamTimeout is the cancel cause when an attempt saw no first byte
// within server.upstream_timeout.
var errUpstreamTimeout = errors.New("upstream_timeout: no first byte in time")

// route builds the plan for the public model and runs the attempt loop
// (SPEC 2.6-2.8, 7).
func (cl *call) route() bool {
	s := cl.s
	stream := cl.req.Stream
	mode := "sync"
	if stream {
		mode = "stream"
	}
	in := routing.PlanInput{
		Snapshot: cl.snap,
		Model:    cl.model,
		Profile: routing.Profile{Op: cl.op, Stream: stream, PromptTokens: cl.promptTokens, OutputTokens: cl.outputTokens,
			Tools: cl.req.Tools > 0, ImageSize: cl.req.ImageSize},
		MaxAttempts: s.cfg().Routing.MaxAttempts[cl.op.String()][mode],
	}
	if cl.keepsPin(cl.model) {
		in.Session = cl.session
		if id := cl.begun.Deployment(cl.model); id != "" {
			in.SessionDeployment, cl.pinnedDep = id, id
		}
	}
	plan, err := s.router().Plan(in)
	if err != nil {
		return cl.fail(errModelNotFound(cl.model))
	}
	cl.plan = plan
	if cl.cacheLookup() {
		return true
	}
	var lastErr error
	probeFailed := false // the last attempt was a recovery probe: fail over at once (SPEC 6)
	for {
		att, ok := plan.Next()
		if !ok {
			break
		}
		if att.N > 1 && !probeFailed && s.cfg().Routing.RetryAfter > 0 && !cl.wait(s.cfg().Routing.RetryAfter) {
			// never sent: not an attempt of the request (X-Switchyard-Attempts
			// and the audit timeline count what went upstream, SPEC 12.3)
			att.Withdraw()
			break
		}
		served, err := cl.attempt(att)
		if served {
			cl.record(plan)
			return true
		}
		lastErr, probeFailed = err, att.Probe
		if cl.ctx.Err() != nil {
			break
		}
	}
	res := cl.record(plan)
	deadline := errors.Is(cl.ctx.Err(), context.DeadlineExceeded)
	if cl.c.Request.Context().Err() != nil {
		// the client went away; nobody reads the answer
		cl.entry.Status = 499
		cl.entry.Error = "client disconnected"
		return false
	}
	e := fromUpstream(lastErr, deadline)
	if res.RetryAfter > 0 && (lastErr == nil || e.Status == http.StatusTooManyRequests || e.Status >= 500) {
		e.RetryAfter = res.RetryAfter
	}
	if lastErr == nil && res.RetryAfter > 0 {
		e.Status, e.Type, e.Code = http.StatusServiceUnavailable, "upstream_unavailable", "all_deployments_cooling_down"
		e.Message = "every deployment of \"" + cl.model + "\" and its fallbacks is cooling down or over quota; retry after " + res.RetryAfter.Round(time.Millisecond).String()
	}
	cl.setDecisionHeaders(res, nil)
	return cl.fail(e)
}

// keepsPin reports whether requests for model keep a deployment pin per
// session: for session keeping (SPEC 8), or for the adaptive selector's
// warm-cache bonus (SPEC 5.1), and only in a pool with a choice to keep
// (SPEC 9: no deployment pin read for a pool of one deployment).
func (cl *call) keepsPin(model string) bool {
	m := cl.snap.Models[model]
	if m == nil || !(cl.s.cfg().Routing.SessionKeeping || m.Strategy == "adaptive") {
		return false
	}
	on := 0
	for _, d := range m.Pool {
		if d.On {
			on++
		}
	}
	return on > 1
}

// wait sleeps d between attempts, never past the request deadline.
func (cl *call) wait(d time.Duration) bool {
	if dl, ok := cl.ctx.Deadline(); ok && time.Until(dl) < d {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-cl.ctx.Done():
		return false
	}
}

// record copies the plan's timeline into the audit entry.
func (cl *call) record(plan *routing.Plan) routing.PlanResult {
	res := plan.Result()
	e := &cl.entry
	e.Attempts = e.Attempts[:0]
	for _, a := range res.Timeline {
		e.Attempts = append(e.Attempts, telemetry.Attempt{
			Deployment: a.Deployment, Model: a.Model, Adapter: a.Adapter, Transport: a.Transport,
			Start: a.Start, Duration: a.Duration, Status: a.Status, Class: a.Class.String(),
			Fallback: a.Fallback, LastResort: a.LastResort, Probe: a.Probe, Error: redact.Credentials(a.Error),
		})
	}
	e.Degraded = res.Degraded
	if res.Reason != "" {
		e.FallbackReason = string(res.Reason)
	}
	if res.Served != nil {
		e.Deployment = res.Served.ID
		e.RoutedModel = res.Served.Model
	}
	return res
}

// attempt makes one upstream call. It reports served=true once the
// response (or the first stream byte) reached the client: no failover is
// possible after that (SPEC 7.1).
func (cl *call) attempt(att *routing.Attempt) (served bool, err error) {
	s := cl.s
	d := att.Deployment
	adapter := s.adapters()[d.Provider.Name]
	if adapter == nil {
		att.Done(routing.Outcome{Class: routing.ClassNetwork, Message: "no adapter for provider " + d.Provider.Name})
		return false, &providers.Error{Class: routing.ClassNetwork, Message: "provider " + d.Provider.Name + " has no adapter"}
	}
	ctx, cancel := context.WithCancelCause(cl.ctx)
	defer cancel(nil)
	// a no-op after the Done below; on a panic (a gateway bug) it still
	// gives back the deployment's in-flight count and probe slot, and never
	// counts the bug against the deployment
	defer att.Done(routing.Outcome{Class: routing.ClassCanceled, Message: "the gateway failed during the attempt"})
	ctx, cl.att = cl.span.StartAttempt(ctx, cl.op, att)
	timer := time.AfterFunc(s.cfg().Server.UpstreamTimeout, func() { cancel(errUpstreamTimeout) })
	t0 := time.Now()
	preq := &providers.Request{
		Op: cl.op, Stream: cl.req.Stream, Client: cl.req, WantUsage: cl.req.IncludeUsage, PromptTokens: cl.promptTokens,
		FirstByte: func() { timer.Stop() }, Header: cl.c.Request.Header,
	}
	if cl.rs != nil {
		preq.ResponsesDone = cl.rs.responsesDone
	}
	resp, err := adapter.Do(ctx, d, preq)
	if err != nil {
		timer.Stop()
		cl.upstream += time.Since(t0)
		err = upstreamTimedOut(ctx, err)
		o := outcomeOf(err, context.Cause(ctx), time.Since(t0))
		s.Metrics.Attempts.WithLabelValues(d.ID, o.Class.String()).Inc()
		att.Done(o)
		cl.att.End(o, tracing.Usage{})
		return false, err
	}
	if resp.Stream == nil {
		timer.Stop()
		lat := time.Since(t0)
		cl.upstream += lat
		s.Metrics.Attempts.WithLabelValues(d.ID, "ok").Inc()
		s.Metrics.UpstreamLatency.WithLabelValues(d.ID).Observe(lat.Seconds())
		s.Metrics.UpstreamTTFB.WithLabelValues(d.ID).Observe(resp.TTFB.Seconds())
		o := routing.Outcome{Status: resp.Status, Class: routing.ClassOK, Latency: lat, TTFB: resp.TTFB}
		att.Done(o)
		cl.att.End(o, tracing.Usage{InputTokens: resp.Usage.PromptTokens, OutputTokens: resp.Usage.CompletionTokens, Body: resp.Body})
		res := cl.plan.Result()
		cl.setDecisionHeaders(res, d)
		var chars int64
		if resp.Usage == (providers.Usage{}) { // only then is the answer's length the charge
			chars = contentChars(resp.Body, contentFields(cl.format, false))
		}
		cl.settle(d, resp.Usage, chars)
		if resp.Usage != (providers.Usage{}) {
			cl.hdr.usd("X-Switchyard-Cost-Usd", cl.entry.CostUSD) // SPEC 10.2, 12.3
		}
		status := resp.Status
		if status == 0 {
			status = http.StatusOK
		}
		cl.contentLength(len(resp.Body))
		cl.hdr.flush(cl.c.Writer.Header())
		cl.entry.Status = status
		if err := s.writeBody(cl.c, status, resp.Body, cl.end); err != nil {
			cl.entry.Error = "client stopped reading the response: " + err.Error()
		} else if cl.cv != nil && status == http.StatusOK && !res.Degraded && !att.Fallback {
			syncEntry(cl.req, resp.Body, cl.cacheMeta(d), s.cfg().Cache.MaxEntryBytes, cl.flight, cl.cacheStore)
		}
		return true, nil
	}
	return cl.relay(ctx, att, resp, t0, timer)
}

// upstreamTimedOut is err, or when ctx (the attempt's) ended by our own
// first-byte timer, a timeout saying so: the adapter sees only a canceled
// context and reports "request canceled by the client", which the client
// would otherwise be answered with (a 502 instead of a 504, SPEC 14).
func upstreamTimedOut(ctx context.Context, err error) error {
	if !errors.Is(context.Cause(ctx), errUpstreamTimeout) {
		return err
	}
	return &providers.Error{Class: routing.ClassTimeout,
		Message: "the upstream sent no first byte within server.upstream_timeout"}
}

// relay streams an upstream SSE response event by event, flushing each as
// it arrives. The first event is read before any byte is written, so a
// stream that fails before its first event still fails over.
func (cl *call) relay(ctx context.Context, att *routing.Attempt, resp *providers.Response, t0 time.Time, timer *time.Timer) (bool, error) {
	s := cl.s
	d := att.Deployment
	st := resp.Stream
	defer st.Close()
	first, err := st.Next()
	timer.Stop()
	ttfb := time.Since(t0)
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = &providers.Error{Class: routing.ClassServerError, Status: http.StatusBadGateway, Message: "upstream closed the stream before any event"}
		}
		cl.upstream += ttfb
		err = upstreamTimedOut(ctx, err)
		o := outcomeOf(err, context.Cause(ctx), ttfb)
		s.Metrics.Attempts.WithLabelValues(d.ID, o.Class.String()).Inc()
		att.Done(o)
		cl.att.End(o, tracing.Usage{Stream: true})
		return false, err
	}
	cl.upstream += ttfb
	res := cl.plan.Result() // timeline so far; this attempt is still open
	res.Served = d
	res.Degraded = res.Degraded || att.Fallback // the open attempt is not in res yet
	cl.setDecisionHeaders(res, d)
	w := cl.c.Writer
	h := w.Header()
	cl.hdr.flush(h)
	h["Content-Type"] = []string{"text/event-stream"}
	h["Cache-Control"] = []string{"no-cache"}
	h["X-Accel-Buffering"] = []string{"no"}
	w.WriteHeader(http.StatusOK)
	cl.entry.Status = http.StatusOK
	o := routing.Outcome{Status: http.StatusOK, Class: routing.ClassOK, TTFB: ttfb}
	var relayed int64 // content characters: the charge when the upstream reports no usage
	defer func() {
		if !cl.out.Served {
			// a panic (a gateway bug, answered by recoverPanic) cut the
			// stream after its first byte: the content relayed reached the
			// client and is charged as any stream cut before its end, not
			// refunded as a request never served
			cl.settleStream(d, st.Usage(), false, relayed)
			cl.entry.Deployment = d.ID
		}
	}()
	// Every write and flush gets write_timeout to make progress: a client
	// that stops reading is cut off then, and the deferred Close releases
	// the upstream call at once (SPEC 14).
	ew := s.newEventWriter(w, cl.end)
	ev := first
	complete := false // the upstream's stream reached its end
	var tap *cacheTap // the response cache's view of the stream (SPEC 18)
	if cl.cv != nil && cl.cv.dir.Store() && !res.Degraded {
		tap = newCacheTap(cl.format, s.cfg().Cache.MaxEntryBytes, cl.flight)
	} else if cl.flight != nil {
		// nothing of this stream is shared (a degraded answer is never
		// stored, SPEC 18): its followers go on alone now, not when it ends
		cl.flight.Fail()
	}
	fields := contentFields(cl.format, true)
	for {
		if st.Ended() {
			s.Edge.Release(cl.releaseCtx(), &cl.begun) // before the client can see the end (SPEC 3)
		}
		if werr := ew.write(ev); werr != nil {
			o.Class = routing.ClassCanceled
			cl.entry.Error = "client stopped reading the stream: " + werr.Error()
			break
		}
		cl.rs.relayed(ev)
		relayed += contentChars(ev, fields)
		if tap != nil {
			tap.relayed(ev)
		}
		ev, err = st.Next()
		if err == nil {
			continue
		}
		if errors.Is(err, io.EOF) {
			complete = true
			break
		}
		if cl.c.Request.Context().Err() != nil {
			o.Class = routing.ClassCanceled
			break
		}
		// mid-stream failure: no failover once a byte reached the client
		o = outcomeOf(err, nil, time.Since(t0))
		o.TTFB = ttfb
		s.Metrics.StreamErrors.WithLabelValues(d.ID).Inc()
		e := fromUpstream(err, false)
		_ = ew.write(cl.streamError(e))
		cl.entry.Error = "stream failed after first byte: " + e.Message
		break
	}
	o.Latency = time.Since(t0)
	s.Metrics.Attempts.WithLabelValues(d.ID, o.Class.String()).Inc()
	s.Metrics.UpstreamTTFB.WithLabelValues(d.ID).Observe(ttfb.Seconds())
	s.Metrics.UpstreamLatency.WithLabelValues(d.ID).Observe(o.Latency.Seconds())
	att.Done(o)
	u := st.Usage()
	cl.att.End(o, tracing.Usage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens, Body: first, Stream: true})
	cl.settleStream(d, u, complete, relayed)
	if tap != nil && o.Class == routing.ClassOK {
		tap.finish(cl.cacheMeta(d), cacheUsage(u), s.cfg().Cache.MaxEntryBytes, res.Degraded, cl.cacheStore)
	}
	return true, nil
}

// outcomeOf classifies an attempt error. cause is the attempt context's
// cancel cause: our own first-byte timer makes it a timeout, a client that
// went away makes it canceled (never counted against the deployment).
func outcomeOf(err, cause error, lat time.Duration) routing.Outcome {
	o := routing.Outcome{Latency: lat, Class: routing.ClassNetwork}
	var pe *providers.Error
	if errors.As(err, &pe) {
		o.Status, o.Class, o.RetryAfter, o.Message = pe.Status, pe.Class, pe.RetryAfter, pe.Message
	}
	if errors.Is(cause, errUpstreamTimeout) {
		o.Class = routing.ClassTimeout
	} else if errors.Is(cause, context.DeadlineExceeded) {
		o.Class = routing.ClassTimeout
	}
	return o
}

// setDecisionHeaders writes the SPEC 12.3 headers before the body.
func (cl *call) setDecisionHeaders(res routing.PlanResult, served *catalog.Deployment) {
	h := &cl.hdr
	if served != nil {
		h.str("X-Switchyard-Model", served.Model)
		h.str("X-Switchyard-Deployment", served.ID)
	}
	n := res.Attempts
	if served != nil && n == 0 {
		n = 1
	}
	h.int("X-Switchyard-Attempts", int64(n))
	if res.Degraded {
		h.str("X-Switchyard-Degraded", "true")
	}
	h.millis("X-Switchyard-Overhead-Ms", time.Since(cl.start)-cl.upstream)
}

// settleStream settles a stream that reached the client with the usage
// its upstream reported (u) and the content characters relayed. A stream
// cut before its end (by the client, the upstream or a gateway panic)
// reported at most the usage of its start (Anthropic's message_start:
// output_tokens 1; the count comes at the end): the content relayed is the
// least its output cost (SPEC 10.2, 14).
func (cl *call) settleStream(d *catalog.Deployment, u providers.Usage, complete bool, relayed int64) {
	if !complete && (u.PromptTokens > 0 || u.CompletionTokens > 0) {
		_, est := edge.Charge(cl.promptTokens, 0, 0, relayed, cl.outputTokens)
		u.CompletionTokens = max(u.CompletionTokens, est)
	}
	cl.settle(d, u, relayed)
}

// settle fills the outcome of a served request: the tokens charged (the
// upstream's usage, clamped, or the estimate from the prompt and the
// content characters relayed, never zero: SPEC 3, 14), their cost at the
// deployment's prices with cached and cache-write input priced apart (SPEC
// 10.2; an estimate has none), the session's deployment pin, and the audit
// usage. The edge state reconciles them in Finish.
func (cl *call) settle(d *catalog.Deployment, u providers.Usage, chars int64) {
	s := cl.s
	if c, changed := u.Clamped(); changed {
		s.Logger.Warn("upstream usage out of range, clamped", "deployment", d.ID, "request_id", cl.reqID,
			"prompt_tokens", u.PromptTokens, "completion_tokens", u.CompletionTokens,
			"cached_tokens", u.CachedTokens, "cache_write_tokens", u.CacheWriteTokens)
		u = c
	}
	prompt, completion := edge.Charge(cl.promptTokens, u.PromptTokens, u.CompletionTokens, chars, cl.outputTokens)
	cached, cacheWrite := 0, 0
	if u.PromptTokens > 0 || u.CompletionTokens > 0 { // the upstream's usage (edge.Charge took it), not the estimate
		cached, cacheWrite = u.CachedTokens, u.CacheWriteTokens
	}
	cost := d.Cost(prompt, cached, cacheWrite, completion)
	e := &cl.entry
	e.PromptTokens, e.CachedTokens, e.CacheWriteTokens, e.CompletionTokens, e.CostUSD = prompt, cached, cacheWrite, completion, cost
	o := &cl.out
	o.Served, o.Deployment = true, d.ID
	o.PromptTokens, o.CompletionTokens, o.CostUSD = prompt, completion, cost
	ts := cl.tokenSeries(d.ID)
	ts.prompt.Add(float64(prompt))
	ts.completion.Add(float64(completion))
	if cost > 0 {
		s.Metrics.Cost.WithLabelValues(cl.team.Name, d.ID).Add(cost)
	}
	if cl.session != "" && cl.keepsPin(cl.model) {
		// a session pin lives session_ttl of inactivity; without session
		// keeping it only carries the adaptive warm-cache bonus, which lasts
		// warm_cache_ttl (SPEC 5.1)
		ttl := s.cfg().SmartRouting.SessionTTL
		if !s.cfg().Routing.SessionKeeping {
			ttl = s.cfg().Routing.WarmCacheTTL
		}
		// the deployment that served, or the session's pin when the
		// request failed over from it without its deployment entering
		// cooldown (SPEC 8)
		o.DepModel, o.DepPin, o.DepTTL = cl.model, cl.plan.SessionDeployment(), ttl
	}
}

// depSeries are a team's switchyard_tokens_total series of one deployment.
type depSeries struct{ prompt, completion *telemetry.Counter }

// tokenSeries is the team's token series of deployment dep, found in the
// row the team keeps (teamRow).
func (cl *call) tokenSeries(dep string) depSeries {
	r := teamRow(&cl.team.Caches.Tokens, cl.s.Metrics.Tokens, cl.team.Name)
	return depSeries{r.With(dep, "prompt"), r.With(dep, "completion")}
}
