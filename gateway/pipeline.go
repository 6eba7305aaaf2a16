package gateway

import (
	"context"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"

	"switchyard/cache"
	"switchyard/catalog"
	"switchyard/edge"
	"switchyard/ratelimit"
	"switchyard/redact"
	"switchyard/routing"
	"switchyard/routing/tier"
	"switchyard/sessions"
	"switchyard/telemetry"
	"switchyard/tracing"
	"switchyard/wire"
)

// call is one client request moving through the pipeline stages of SPEC 2.
// Each stage reads and fills it; a stage that answers the client returns
// false and the pipeline stops.
type call struct {
	s      *Server
	c      *gin.Context
	ctx    context.Context
	start  time.Time
	end    time.Time // the request's deadline (server.request_timeout): no write passes it
	reqID  string
	format wire.Format
	op     catalog.Operation

	snap    *catalog.Snapshot
	req     *wire.Request
	team    *catalog.Team
	key     *catalog.KeyInfo // the key it authenticated with
	edgeReq edge.Request
	sized   bool       // the answer is complete and has its Content-Length: finish flushes it first
	body    bodyLease  // the body's bytes in the node's body budget, released when serve returns
	begun   edge.Begun // the edge state's admission and the pins it read (SPEC 9)

	alias      string // requested name when it was a tier alias
	model      string // public model after the tier stage
	verdict    *tier.Verdict
	classified *tier.Verdict // the classifier's verdict, computed once (classify)
	session    string
	sessionSrc string
	pinnedDep  string
	plan       *routing.Plan

	promptTokens int
	outputTokens int
	upstream     time.Duration // time spent waiting on upstreams

	out   edge.Outcome // how the request ended, handed to the edge state once
	entry telemetry.Entry
	hdr   headerBatch      // response headers decided so far, written with the first byte
	span  *tracing.Request // the server span; nil with tracing off
	att   *tracing.Attempt // the open attempt's client span; nil with tracing off

	// cv is the request's response-cache view, and cacheKey and
	// cacheModel the key its answer is stored under and the public model
	// that key answers for; cv is nil when it is not cacheable
	// (cache_pipeline.go).
	cv         *cacheView
	cacheKey   cache.Key
	cacheModel string
	flight     *cache.Flight // this request leads identical ones on the node; ended in finish

	// rs is the Responses API state (responses.go); nil for other formats.
	rs *responsesCall
}

// callPool recycles calls: at 2.7 KB the call is the largest allocation a
// request makes, an eighth of its bytes (with the plan, pooled beside it,
// about 2 µs of CPU a request on a loaded node, 2026-12-07). A call is
// reachable only from its own request: the edge state's admission is
// synchronous (a follower in a group commit waits for its answer, and the
// leader touches no call after handing it its answer), Finish copies what
// it keeps, the audit entry is a copy of its own, and no header value
// points into the call (Content-Length goes through the header batch).
var callPool = sync.Pool{New: func() any { return new(call) }}

// putCall releases cl's plan, empties cl, so a pooled call holds nothing
// of its request (body, parsed messages, catalog snapshot), and pools it.
// The plan goes with it: its timeline was copied into the audit entry and
// rendered into the headers.
func putCall(cl *call) {
	if cl.plan != nil {
		cl.plan.Release()
	}
	*cl = call{}
	callPool.Put(cl)
}

func (s *Server) handleChat(c *gin.Context) { s.serve(c, catalog.OpChat, wire.FormatOpenAI) }

func (s *Server) handleEmbeddings(c *gin.Context) {
	s.serve(c, catalog.OpEmbeddings, wire.FormatOpenAI)
}

func (s *Server) handleImages(c *gin.Context) { s.serve(c, catalog.OpImages, wire.FormatOpenAI) }

func (s *Server) handleMessages(c *gin.Context) { s.serve(c, catalog.OpChat, wire.FormatAnthropic) }

// handleResponses (POST /v1/responses) is in responses.go.

// serve runs the pipeline: authenticate, parse, edge limits, tier,
// allowlist, pool and attempts, respond (SPEC 2). The key is checked from
// the headers before a byte of the body is read.
func (s *Server) serve(c *gin.Context, op catalog.Operation, format wire.Format) {
	cl := callPool.Get().(*call)
	defer putCall(cl) // last: after finish and the body's release
	cl.s, cl.c, cl.start, cl.op, cl.format, cl.snap = s, c, time.Now(), op, format, s.Catalog.Load()
	cl.reqID = s.newRequestID(c.Request)
	cl.hdr.str("X-Request-Id", cl.reqID)
	cl.hdr.str("Request-Id", cl.reqID) // the Anthropic SDKs read this name (SPEC 10)
	ctx, cancel := context.WithTimeout(c.Request.Context(), s.cfg().Server.RequestTimeout)
	defer cancel()
	cl.end, _ = ctx.Deadline()
	cl.ctx, cl.span = s.Tracer.StartRequest(ctx, c.Request, c.FullPath())
	defer cl.body.release() // after finish: the body is referenced until the request ends
	defer cl.finish()
	defer cl.recoverPanic() // first: finish then records and releases the request as on any exit

	_ = cl.authenticate() && cl.parse() && cl.endUser() && cl.conversation() && cl.begin() && cl.edgeLimit() && cl.tierRoute() && cl.allow() && cl.route()
}

// recoverPanic answers a request whose handling panicked (a gateway bug)
// the way the pipeline answers any failure: in the client's format, with
// the request's headers (the X-Request-Id the message tells the client to
// quote, and the panic is logged under it), or, once a stream has begun, by
// ending it with an error event (SPEC 7.1) so the cut never reads as a
// complete answer. gin's recovery, outside the handler, knew neither the
// format nor the headers, and appended a bare JSON body to a stream that
// then ended cleanly. A stream cut so is charged for what it relayed
// (relay settles it while the panic unwinds), not refunded.
func (cl *call) recoverPanic() {
	r := recover()
	if r == nil {
		return
	}
	if r == http.ErrAbortHandler {
		panic(r) // net/http's own way to cut the connection
	}
	cl.s.Logger.Error("panic in handler", "request_id", cl.reqID, "error", r, "path", cl.c.Request.URL.Path,
		"stack", string(debug.Stack()))
	w := cl.c.Writer
	if !w.Written() {
		cl.fail(errInternal)
		return
	}
	cl.entry.Error = "internal error after the first byte: " + errInternal.Message
	if ct := w.Header()["Content-Type"]; len(ct) == 1 && ct[0] == "text/event-stream" {
		ew := cl.s.newEventWriter(w, cl.end)
		_ = ew.write(cl.streamError(errInternal))
	}
}

// fail answers the client with e and records it.
func (cl *call) fail(e *apiError) bool {
	cl.entry.Status = e.Status
	cl.entry.Error = e.Message
	w := cl.c.Writer
	cl.hdr.flush(w.Header())
	if now := time.Now(); cl.end.IsZero() || now.Before(cl.end) {
		cl.s.renewWriteDeadline(w, cl.end)
	} else if d := connDeadlines(w); d != nil {
		// the request's deadline has passed (its 504, SPEC 14): capped at
		// it, the write would fail at once and the client would get the
		// connection closed instead of the answer. An error body is small
		// and the first bytes of the response, so it does not block on a
		// client that does not read: write_timeout alone bounds it
		_ = d.SetWriteDeadline(writeDeadline(now, cl.s.cfg().Server.WriteTimeout, time.Time{}))
	}
	writeErrorFormat(cl.c, e, cl.format)
	return false
}

// parse reads the bounded body once and parses it under the shape limits
// (SPEC 2.2, 14).
func (cl *call) parse() bool {
	body, e := cl.s.readBody(cl.c, &cl.body, cl.end)
	if e != nil {
		return cl.fail(e)
	}
	req, err := wire.ParseLimited(body, cl.op, cl.format, cl.s.shapeLimits())
	if err != nil {
		return cl.fail(fromInputError(err))
	}
	cl.req = req
	cl.model = req.Model
	cl.promptTokens = req.PromptTokens()
	cl.outputTokens = req.OutputTokens(cl.s.cfg().Routing.DefaultMaxTokens)
	return true
}

// endUser names the request's end user (SPEC 3.1): the first present of
// the X-Switchyard-User header and the body's safety_identifier, user and
// metadata.user_id; at most 128 bytes. It is scoped by the team and never
// taken from a credential. A team with require_user refuses a request
// that names none.
func (cl *call) endUser() bool {
	user, field := cl.c.Request.Header.Get(userHeader), "X-Switchyard-User"
	if user == "" {
		user, field = cl.req.EndUser()
	}
	if len(user) > wire.MaxEndUserBytes {
		return cl.fail(&apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "user_too_long", Param: field,
			Message: field + ": an end-user id is at most 128 bytes, got " + strconv.Itoa(len(user)) + "; send a shorter id (a hash of a long one)"})
	}
	if user != "" && (user == apiKey(cl.c.Request) || redact.Credentials(user) != user) {
		// a credential would be stored in audit entries and usage rows and
		// shown in the console: refused, not masked, so two keys never
		// become one masked user
		return cl.fail(&apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "invalid_user", Param: field,
			Message: field + ": an end-user id must not be a credential (an API key or token); send your own id for the user, or a hash of it"})
	}
	if user == "" && cl.team.RequireUser {
		return cl.fail(&apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "user_required", Param: "user",
			Message: "team " + cl.team.Name + " requires an end user: send the X-Switchyard-User header, or safety_identifier, user or metadata.user_id in the body"})
	}
	cl.entry.User = user
	return true
}

// userHeader names the end user of a request (SPEC 3.1).
const userHeader = "X-Switchyard-User"

func (cl *call) authenticate() bool {
	cl.team, cl.key = cl.snap.AuthenticateKey(apiKey(cl.c.Request), time.Now())
	if cl.team == nil {
		return cl.fail(errNoKeyOr(cl.c.Request))
	}
	cl.entry.Team = cl.team.Name
	if cl.key != nil {
		cl.entry.Key = cl.key.ID
	}
	return true
}

// begin asks the edge state, in one round trip, for the admission and the
// session pins this request can use (SPEC 9): its tier pin when it names a
// tier route, and the deployment pin of each model it may be routed to that
// keeps one.
func (cl *call) begin() bool {
	q := &cl.edgeReq // in the pooled call: no allocation of its own
	*q = edge.Request{RequestID: cl.reqID, Team: cl.team, Tokens: int64(cl.promptTokens + cl.outputTokens), Deadline: cl.end}
	budget := cl.team.Budget.USD > 0
	if l := cl.key.Level(); l != nil {
		q.Key = edge.Level{Kind: edge.LevelKey, ID: cl.key.ID, Name: cl.key.Name, Limits: l}
		budget = budget || l.Budget.USD > 0
	}
	if u := cl.entry.User; u != "" {
		if l := cl.team.UserLevel(u); l != nil {
			q.User = edge.Level{Kind: edge.LevelUser, ID: u, Name: u, Limits: l}
			budget = budget || l.Budget.USD > 0
		}
	}
	if budget { // a budget reserves the highest cost this request can reach
		q.CostUSD = cl.snap.CostBound(cl.req.Model, cl.promptTokens, cl.outputTokens)
	}
	route := cl.snap.Routes[cl.req.Model]
	models := [2]string{cl.req.Model}
	if route != nil {
		models = [2]string{route.Easy, route.Hard}
	}
	var p edge.PinQuery
	for i, m := range models {
		if m != "" && cl.keepsPin(m) {
			p.Models[i] = m
		}
	}
	if route != nil {
		p.TierAlias = route.Alias
	}
	if p.TierAlias != "" || p.Models[0] != "" || p.Models[1] != "" {
		p.Session = cl.sessionKey()
	}
	cl.cacheView(route, &p) // the response-cache entries this request may be answered with
	q.Pins = p
	var t0 time.Time
	if cl.span != nil {
		t0 = time.Now()
	}
	b, err := cl.s.Edge.Begin(cl.ctx, q)
	if cl.span != nil && (b.Limited() || p.Count() > 0) {
		cl.span.EdgeState(cl.ctx, t0, b.Limited(), p.Count(), b.Local)
	}
	if err != nil {
		cl.s.Logger.Warn("edge state failed; admitting", "team", cl.team.Name, "error", err)
	}
	cl.begun = b
	return true
}

// edgeLimit applies the team's RPM/TPM/parallel/budget before any routing
// (SPEC 3): a rejected request never touches a deployment.
func (cl *call) edgeLimit() bool {
	t := cl.team
	d := &cl.begun.Decision
	cl.setLimitHeaders(d)
	if !d.Allowed {
		cl.s.Metrics.EdgeRejections.WithLabelValues(t.Name, d.Kind).Inc()
		typ, code := "rate_limit_exceeded", "rate_limit_exceeded"
		level := edge.LevelKind(d.Level)
		who := "team " + t.Name
		switch level {
		case edge.LevelKey:
			who = "key " + cl.edgeReq.Key.Name + " of team " + t.Name
		case edge.LevelUser:
			who = "user " + strconv.Quote(cl.edgeReq.User.Name) + " of team " + t.Name
		}
		msg := who + " is over its " + d.Kind + " limit; retry after " + d.RetryAfter.Round(time.Millisecond).String()
		if d.Kind == "budget" {
			typ, code = "budget_exceeded", "budget_exceeded"
			msg = who + " has spent its budget for this period; it resets in " + d.RetryAfter.Round(time.Second).String()
		}
		cl.hdr.str("X-Switchyard-Limit-Level", level.String()) // SPEC 3.1: the level that refused
		return cl.fail(&apiError{Status: http.StatusTooManyRequests, Type: typ, Code: code, Message: msg, RetryAfter: d.RetryAfter})
	}
	return true
}

func (cl *call) setLimitHeaders(d *ratelimit.Decision) {
	h := &cl.hdr
	if d.LimitRequests > 0 {
		h.int("X-Ratelimit-Limit-Requests", d.LimitRequests)
		h.int("X-Ratelimit-Remaining-Requests", d.RemainingRequests)
		h.reset("X-Ratelimit-Reset-Requests", d.ResetRequests)
	}
	if d.LimitTokens > 0 {
		h.int("X-Ratelimit-Limit-Tokens", d.LimitTokens)
		h.int("X-Ratelimit-Remaining-Tokens", d.RemainingTokens)
		h.reset("X-Ratelimit-Reset-Tokens", d.ResetTokens)
	}
}

// sessionKey detects the request's session once, when a stage needs it.
func (cl *call) sessionKey() string {
	if cl.sessionSrc == "" {
		cl.session, cl.sessionSrc = sessions.Detect(cl.team.Name, cl.c.Request.Header, cl.req)
		cl.entry.Session = cl.sessionSrc
	}
	return cl.session
}

// tierRoute rewrites a tier alias to its easy or hard target (SPEC 4).
func (cl *call) tierRoute() bool {
	route := cl.snap.Routes[cl.req.Model]
	if route == nil {
		return true
	}
	s := cl.s
	cl.alias = route.Alias
	h := cl.c.Request.Header
	smartOff := smartRoutingOff(h)
	forced := headerAny(h, "X-Switchyard-Tier", "X-Gomodel-Tier")
	if forced != "" {
		t, ok := tier.ParseTier(forced) // any case, as a stored pin is read
		if !ok {
			return cl.fail(errBadRequest("X-Switchyard-Tier", "X-Switchyard-Tier must be \"easy\" or \"hard\", got \""+forced+"\""))
		}
		forced = t.String()
	}
	pin, havePin := tier.ParseTier(cl.begun.Pins.Tier)
	v, newPin, store, escalated := tier.Decide(*route, smartOff, forced, cl.classify, pin, havePin)
	if v.Tier == tier.Hard {
		v.Target = route.Hard
	} else {
		v.Target = route.Easy
	}
	cl.verdict = &v
	cl.model = v.Target
	if store && cl.session != "" {
		cl.out.TierPin, cl.out.TierTTL = newPin.String(), s.cfg().SmartRouting.SessionTTL
	}
	tierName := v.Tier.String()
	s.Metrics.SmartRequests.WithLabelValues(route.Alias, tierName).Inc()
	s.Metrics.SmartScore.WithLabelValues(route.Alias).Observe(float64(v.Score))
	if escalated {
		s.Metrics.SmartEscalations.WithLabelValues(route.Alias).Inc()
	}
	cl.hdr.str("X-Switchyard-Tier", tierName)
	cl.hdr.int("X-Switchyard-Tier-Score", int64(v.Score))
	cl.hdr.str("X-Switchyard-Tier-Source", v.Source)
	cl.hdr.str("X-Switchyard-Tier-Target", v.Target)
	return true
}

// classify is the classifier's verdict on the request, computed once: a
// coalescing tier alias needs it before Begin (preTier), the tier stage
// after.
func (cl *call) classify() tier.Verdict {
	if cl.classified == nil {
		v := cl.s.classifier().Classify(cl.req)
		cl.classified = &v
	}
	return *cl.classified
}

// smartRoutingOff reports X-Switchyard-Smart-Routing: off (any case).
func smartRoutingOff(h http.Header) bool {
	return strings.EqualFold(strings.TrimSpace(headerAny(h, "X-Switchyard-Smart-Routing", "X-Gomodel-Smart-Routing")), "off")
}

// preTier is the tier a tier alias's request goes to as far as it is
// known before Begin: what tier.Decide answers without the session's pin
// (a forced tier, smart routing off, else the classifier's verdict). The
// pin Begin reads can only move it from easy to hard.
func (cl *call) preTier(route *catalog.TierRoute) tier.Tier {
	h := cl.c.Request.Header
	if t, ok := tier.ParseTier(headerAny(h, "X-Switchyard-Tier", "X-Gomodel-Tier")); ok {
		return t
	}
	if smartRoutingOff(h) {
		t, _ := tier.ParseTier(route.DefaultTier)
		return t
	}
	return cl.classify().Tier
}

func headerAny(h http.Header, names ...string) string {
	for _, n := range names {
		if v := h.Get(n); v != "" {
			return v
		}
	}
	return ""
}

// allow checks the allowlist before existence (SPEC 2.5), so a restricted
// team cannot probe which models exist. The alias must be allowed too.
func (cl *call) allow() bool {
	// the key's models narrow the team's (SPEC 3.1)
	if cl.alias != "" && (!cl.team.Allows(cl.alias) || !cl.key.Allows(cl.alias)) {
		return cl.fail(errNotAllowed(cl.alias))
	}
	if !cl.team.Allows(cl.model) || !cl.key.Allows(cl.model) {
		return cl.fail(errNotAllowed(cl.model))
	}
	return true
}

// finish records the request once, whatever path it took, and hands the
// outcome to the edge state (SPEC 3: every exit reconciles).
func (cl *call) finish() {
	s := cl.s
	if cl.flight != nil {
		cl.flight.Fail() // a no-op once the answer completed it: releases followers on every other exit
	}
	if cl.entry.Status == 0 {
		cl.entry.Status = cl.c.Writer.Status()
	}
	dur := time.Since(cl.start)
	// the audit log keeps its own copy: a pointer into the call would keep
	// the whole request (body, parsed messages) alive in the ring
	e := new(telemetry.Entry)
	*e = cl.entry
	e.RequestID = cl.reqID
	e.Node = s.Config.Server.NodeID
	e.Time = cl.start
	e.Operation = cl.op.String()
	if cl.req != nil {
		e.RequestedModel = cl.req.Model
		e.Stream = cl.req.Stream
	}
	e.RoutedModel = cl.model
	e.Error = redact.Credentials(e.Error) // what the gateway wrote may quote upstream text (SPEC 15)
	e.DurationMs = float64(dur.Microseconds()) / 1000
	e.OverheadMs = float64((dur - cl.upstream).Microseconds()) / 1000
	if cl.verdict != nil {
		v := cl.verdict
		tv := &telemetry.TierVerdict{Alias: cl.alias, Tier: v.Tier.String(), Score: v.Score, Source: v.Source, Target: v.Target}
		for _, sg := range v.Signals {
			tv.Signals = append(tv.Signals, telemetry.Signal{Name: sg.Name, Points: sg.Points, Detail: sg.Detail})
		}
		e.Tier = tv
	}
	if cl.span != nil {
		cl.span.End(spanOutcome(e))
	}
	// the slot is free before the answer's last byte leaves, so a
	// sequential client's next request finds it free on any replica (SPEC 3;
	// a stream released it before its terminal event)
	s.Edge.Release(cl.releaseCtx(), &cl.begun)
	if cl.sized {
		// the answer (with its Content-Length) goes to the client now: the
		// bookkeeping below (edge hand-off, metrics, log line) is not part
		// of its latency (streams are flushed already; errors are small)
		cl.c.Writer.Flush()
	}
	team := e.Team
	if team == "" {
		team = noTeam
	}
	model := cl.model
	if cl.snap.Models[model] == nil && cl.snap.Routes[model] == nil {
		model = "-" // bound the label set: unknown names never become labels
	}
	cl.requestSeries(model, team, e.Status).Inc()
	s.Metrics.RequestDuration.WithLabelValues(model).Observe(dur.Seconds())
	s.Metrics.Overhead.Observe((dur - cl.upstream).Seconds())
	cl.out.Audit = e
	// the usage row by level (SPEC 3.1): the edge keeps the sums per (team,
	// key, end user, public model, day)
	o := &cl.out
	o.Model, o.KeyID, o.User = cl.model, e.Key, e.User
	o.CachedTokens, o.Cached, o.SavedUSD = e.CachedTokens, e.Cached, e.SavedUSD
	s.Edge.Finish(&cl.begun, &cl.out)
	s.RequestLog.Write(e, cl.start.Add(dur)) // the audit entry as one structured log line (SPEC 12.2)
}

// releaseCtx is the context the slot's release runs under: the request's,
// or when that has ended (the client went away, request_timeout passed)
// one without its end, so the edge state's ZREM (bounded by redis.timeout)
// still runs now instead of failing at once and waiting for the writer,
// and the client's next request finds the slot free (SPEC 3).
func (cl *call) releaseCtx() context.Context {
	if cl.ctx.Err() != nil {
		return context.WithoutCancel(cl.ctx)
	}
	return cl.ctx
}

// requestSeries is the switchyard_requests_total series of this request,
// found in the row an authenticated team keeps (teamRow).
func (cl *call) requestSeries(model, team string, status int) *telemetry.Counter {
	table := cl.s.Metrics.Requests
	code := statusLabel(status)
	if cl.team == nil {
		return table.WithLabelValues(model, team, code)
	}
	return teamRow(&cl.team.Caches.Series, table, team).With(model, code)
}

// teamRow is the team's row of table, kept in the team's slot: with 10,000
// teams the table's lookup by team was a cache miss per request, while the
// team is in cache already. A slot holds the row of one server's table
// (servers in one process may share a catalog); another server's replaces
// it.
func teamRow(slot *atomic.Value, table *telemetry.CounterTable, team string) *telemetry.CounterRow {
	if r, _ := slot.Load().(*telemetry.CounterRow); r != nil && r.Table() == table {
		return r
	}
	r := table.Row(team)
	slot.Store(r)
	return r
}

// statusLabels are the status label values of the codes 100 to 599, made
// once: strconv.Itoa allocates a string per request for each of them.
var statusLabels = func() (out [500]string) {
	for i := range out {
		out[i] = strconv.Itoa(100 + i)
	}
	return out
}()

// statusLabel is status as a label value.
func statusLabel(status int) string {
	if status >= 100 && status < 600 {
		return statusLabels[status-100]
	}
	return strconv.Itoa(status)
}

// spanOutcome is the server span's SPEC 12.5 attributes, from the audit entry.
func spanOutcome(e *telemetry.Entry) tracing.Outcome {
	o := tracing.Outcome{Status: e.Status, RequestID: e.RequestID, Team: e.Team, RequestedModel: e.RequestedModel,
		Attempts: len(e.Attempts), Degraded: e.Degraded}
	if e.Deployment != "" {
		o.ServedModel = e.RoutedModel
	}
	if e.Tier != nil {
		o.Tier = e.Tier.Tier
	}
	return o
}
