// Package edge owns the edge state of SPEC 3 and 9: the per-request
// conversation with the shared state, behind one interface. Begin decides
// the admission (team RPM, TPM, max_parallel, budget) and reads only the
// session pins this request can use, in one Redis round trip; Finish hands
// the outcome (reconcile, slot release, pin writes, usage, audit entry) to
// one background writer and never blocks. For the response cache (SPEC 18)
// Begin also reads the entries a request may be answered with and takes
// or finds the coalescing lease of a missing one (lease.go), and Await
// waits for another node's answer (notices.go). A Redis and a local
// implementation sit behind the interface, and the switch to local state
// when Redis is unreachable lives inside the Redis one, so the gateway has
// one path whatever Redis does.
//
// Every Redis key of a team (limits, slots, pins, usage) carries the team's
// hash tag, so one script reads and writes them on one Cluster shard.
// edge imports ratelimit (the local limiter and the GCRA arithmetic),
// sessions (the local pin store), telemetry (audit storage) and go-redis;
// never gin, gateway or routing.
package edge

import (
	"context"
	"time"

	"switchyard/catalog"
	"switchyard/config"
	"switchyard/ratelimit"
	"switchyard/telemetry"
)

// State is the edge state of one node (SPEC 9). Implementations are safe
// for concurrent use.
type State interface {
	// Begin admits r (when its team has limits) and reads the pins r.Pins
	// asks for, in at most one round trip bounded by redis.timeout. The
	// error is non-nil only for a broken Request (no team); an unreachable
	// Redis answers from local state.
	Begin(ctx context.Context, r *Request) (Begun, error)
	// Finish records how a begun request ended. It is O(1), takes no lock
	// the writer holds while it talks to Redis, and never blocks. Call it
	// exactly once per Begun, on every exit path (a zero Begun is fine).
	Finish(b *Begun, o *Outcome)
	// Release frees b's max_parallel slot now, before the answer's last
	// byte leaves, so a sequential client's next request finds it free on
	// any replica (SPEC 3: a release is visible to the very next
	// admission). In Redis it costs one ZREM bounded by redis.timeout, and
	// only for a request holding a shared slot; when that call fails or the
	// breaker is open, Finish hands the release to the writer as before.
	// Optional: Finish releases whatever Release did not.
	Release(ctx context.Context, b *Begun)
	// Await waits for the response-cache entry whose coalescing lease b
	// follows (b.Coalesce is CoalesceFollow: another node's request is
	// calling the upstream for it, SPEC 18) and returns it encoded. It ends
	// when the leader's completion notice or a poll finds the entry, and
	// with an error when the leader failed, its lease is gone without an
	// entry, ctx ends (the gateway gives it cache.coalesce_wait) or Redis
	// does not answer: the request then goes on alone. Every Redis call is
	// bounded by redis.timeout.
	Await(ctx context.Context, b *Begun) (string, error)
	// Shared reports whether decisions are currently taken in Redis.
	Shared() bool
	// Usage reads the team's live state against its limits for the admin
	// API (cluster-wide when Redis answers); never called on the request path.
	Usage(ctx context.Context, t *catalog.Team) (TeamUsage, error)
	// LevelUsage is Usage for a key or end-user level of team t.
	LevelUsage(ctx context.Context, t *catalog.Team, l Level) (TeamUsage, error)
	// UsageRows reads the usage rows by (team, key, user, model, day) q
	// selects (SPEC 3.1): the cluster's when Redis answers, else this
	// node's own. Never called on the request path.
	UsageRows(ctx context.Context, q UsageQuery) (UsageReport, error)
	// Close flushes what the writer holds, bounded by ctx.
	Close(ctx context.Context) error
	// SetBudgetAlert names what is called once per level and budget period
	// when the level's spend crosses budget.alert_at (SPEC 3.1): once for
	// the cluster with Redis, once per node local-only. Set before use.
	SetBudgetAlert(fn BudgetAlert)
	// TeamNames calls fn with every team this node holds edge state of.
	TeamNames(fn func(team string))
	// ForgetTeams drops, in one pass, the state of the teams drop names:
	// teams the catalog no longer has, once none of their requests can
	// still be running (the gateway's sweep of gone teams waits for that).
	// State it cannot drop yet (writes not in Redis, a live slot) is kept
	// for a later call. Never called on the request path.
	ForgetTeams(drop func(team string) bool)
}

// Request is what Begin needs to know about a request.
type Request struct {
	RequestID string        // X-Request-Id (not unique: clients may reuse one)
	Team      *catalog.Team // the authenticated team
	Tokens    int64         // prompt estimate + output estimate, reserved against TPM
	// CostUSD is the request's highest possible cost, reserved against the
	// budget at admission and replaced by the real cost at Finish (SPEC 3.1).
	CostUSD float64
	// Key and User are the request's key and end-user levels (SPEC 3.1):
	// a level whose Limits are nil is not checked.
	Key, User Level
	Pins      PinQuery
	// Deadline is the request's (server.request_timeout; zero: none): a
	// max_parallel slot the local fallback gives it is kept until past
	// it, should its release be lost (ratelimit.Admission.Until).
	Deadline time.Time
}

// Level names one key or end-user level of a team (SPEC 3.1).
type Level struct {
	Kind LevelKind
	// ID is the key's id, or the end user (already at most 128 bytes).
	ID string
	// Name is how a message names it: the key's name, or the end user.
	Name   string
	Limits *config.Limits // nil: no limits at this level
}

// LevelKind tells the levels apart.
type LevelKind uint8

// The levels of SPEC 3.1, as X-Switchyard-Limit-Level and the
// budget_alerts_total label name them.
const (
	LevelTeam LevelKind = iota
	LevelKey
	LevelUser
)

// String is the level's name: team, key or user.
func (k LevelKind) String() string {
	switch k {
	case LevelKey:
		return "key"
	case LevelUser:
		return "user"
	}
	return "team"
}

// limited reports whether l has limits to check.
func (l *Level) limited() bool { return l.Limits.Any() }

// levelsLimited reports whether q's key or user level sets a limit.
func (q *Request) levelsLimited() bool { return q.Key.limited() || q.User.limited() }

// limited reports whether any level of q sets a limit: else nothing of it
// is admitted, only read.
func (q *Request) limited() bool { return limited(q.Team) || q.levelsLimited() }

// levelsOf is q's key and user levels when either has limits, else nil
// (Begun keeps them only then: they are 96 bytes in every request).
func levelsOf(q *Request) *[2]Level {
	if !q.levelsLimited() {
		return nil
	}
	return &[2]Level{q.Key, q.User}
}

// PinQuery names the pins a request can use (SPEC 9: only those), and the
// response-cache entries it may be answered with (SPEC 18: read in the
// same round trip). An empty Session reads no pin.
type PinQuery struct {
	Session   string    // the session key from sessions.Detect, already team-scoped
	TierAlias string    // read the tier pin of this tier route ("" = no tier route)
	Models    [2]string // read the deployment pin of these public models ("" = none)
	// Cache names the entries to read, as CacheKey gives them: the model's,
	// or a tier alias's easy and hard ones ("" = none).
	Cache [2]string
	// Coalesce asks Begin, when Cache[Lease] is missing, to take that
	// entry's coalescing lease in the same round trip, or to report another
	// request's (SPEC 18: cross-node coalescing; Begun.Coalesce). Set it
	// only for a request that may read the entry and would call the
	// upstream on a miss.
	Coalesce bool
	// Lease is the entry Coalesce is about: 0, or 1 for a tier alias whose
	// tier, as the gateway decides it before Begin, is hard. The session's
	// tier pin, read in the same round trip, may still move the request to
	// the other tier; the gateway then ends the lease (LeaseDropper).
	Lease int
}

// LeaseDropper is implemented by a State whose leases live beyond the node
// (Redis): DropLease ends the coalescing lease b leads at once, without an
// entry, and b no longer takes part in cross-node coalescing (its
// followers go on alone). A tier alias calls it when the session's pin
// moved the request off the tier whose entry it leased.
type LeaseDropper interface {
	DropLease(b *Begun)
}

// CacheKey is the name of a response-cache entry under its team's hash
// tag: the public model it answers for and the entry key's hex form, so a
// purge of one model's entries finds them by name (SCAN MATCH) without
// reading them.
func CacheKey(model, hex string) string { return CacheKeyPrefix + model + ":" + hex }

// CacheKeyPrefix starts every entry name (CacheKey).
const CacheKeyPrefix = "rc:"

// Count is how many pins and entries q asks Begin to read.
func (q *PinQuery) Count() int {
	n := 0
	for _, c := range q.Cache {
		if c != "" {
			n++
		}
	}
	if q.Session == "" {
		return n
	}
	if q.TierAlias != "" {
		n++
	}
	for _, m := range q.Models {
		if m != "" {
			n++
		}
	}
	return n
}

// Role is a request's part in cross-node coalescing (SPEC 18), as Begin
// found it.
type Role uint8

// The roles of Begun.Coalesce.
const (
	// CoalesceNone: coalescing was not asked for, or the entry was found.
	CoalesceNone Role = iota
	// CoalesceLead: the entry is missing and this request calls the
	// upstream; other nodes' identical requests wait for its answer. Its
	// Finish ends the lease: with the entry (Outcome.CacheKey names it) the
	// followers are woken to read it, without it they are released. A node
	// without Redis, or with Redis unreachable, always leads (its own
	// requests coalesce in process).
	CoalesceLead
	// CoalesceFollow: another request holds the entry's lease; Await waits
	// for its answer.
	CoalesceFollow
)

// String is the role's name.
func (r Role) String() string {
	switch r {
	case CoalesceLead:
		return "lead"
	case CoalesceFollow:
		return "follow"
	}
	return "none"
}

// Pins are the pins Begin found ("" when absent), aligned with the query.
type Pins struct {
	Tier  string
	Deps  [2]string
	Cache [2]string // the encoded entries, aligned with PinQuery.Cache
}

// Begun is an admitted (or rejected) request and what Begin read for it.
type Begun struct {
	Decision ratelimit.Decision // Allowed is true for a team without limits
	Pins     Pins
	// Local is set when node-local state answered Begin: a node without
	// Redis, or Redis unreachable (the request's trace shows it).
	Local bool
	// Coalesce is the request's part in cross-node coalescing when
	// PinQuery.Coalesce asked for it (SPEC 18).
	Coalesce Role

	q      PinQuery
	team   *catalog.Team
	ts     *teamState // the Redis state's record of team (looked up once per request)
	tokens int64      // the estimate at admission
	// lv is the request's key and user levels when the local limiter
	// decided it (nil: neither has limits, or Redis decided: t.subs holds
	// the levels it admitted, so they are not stored twice)
	lv     *[2]Level
	levels bool // its key or user level has limits (set by both edges' Begin)
	t      ticket
	lease  string // the full name of the coalescing lease it leads or follows ("" = none)
	tok    string // the lease's token when this request holds it in Redis ("" = it does not)
}

// Deployment returns the deployment pin Begin read for model.
func (b *Begun) Deployment(model string) string {
	for i, m := range b.q.Models {
		if m != "" && m == model {
			return b.Pins.Deps[i]
		}
	}
	return ""
}

// Limited reports whether Begin decided an admission: the team has limits.
func (b *Begun) Limited() bool {
	return b.team != nil && (limited(b.team) || b.levels)
}

// ticket is what Finish needs to undo or correct an admission.
type ticket struct {
	admitted bool    // a limited team was admitted: Finish reconciles
	local    bool    // the local limiter decided (Redis unreachable or absent)
	slot     string  // Redis slot id ("" without max_parallel at any level, or when local)
	teamSlot bool    // the team level holds slot
	reserved int64   // tokens reserved against TPM
	end      int64   // TPM TAT right after this reservation (Redis µs); bounds refunds
	usd      float64 // reserved against the budget (its highest possible cost)
	window   int64   // the budget window of that reservation
	lt       ratelimit.Ticket
	released bool // the local slot was released by Release
	// remote is the admission whose script may have taken a slot although
	// it failed in an unknown state (a timeout): Finish removes the slot in
	// Redis too, at every level.
	remote *admitCall
	subs   *[2]subTicket // the key and user levels Redis decided, the first nsub (nil: none)
	nsub   int
}

// Outcome is how a request ended (SPEC 3: every exit reconciles).
type Outcome struct {
	// Served is true once an answer (or the first stream byte) reached the
	// client. An admitted request that was not served refunds its whole
	// token reservation.
	Served     bool
	Deployment string // id of the deployment that served
	// Tokens charged and their price: from Charge.
	PromptTokens, CompletionTokens int
	CostUSD                        float64

	// Usage by level (SPEC 3.1): the public model that served (or whose
	// stored answer was served), the id of the key, the end user ("" =
	// none), the part of PromptTokens the upstream read from its prompt
	// cache, and for an answer from the response cache (SPEC 18: Cached,
	// with Served false) what it saved. A served or cached request makes one
	// row of the (team, key, user, model, day) usage.
	Model, KeyID, User string
	CachedTokens       int
	Cached             bool
	SavedUSD           float64

	// Pin writes: a new tier pin for the queried alias ("" = none), and a
	// deployment pin for DepModel.
	TierPin  string
	TierTTL  time.Duration
	DepModel string
	DepPin   string
	DepTTL   time.Duration

	// A response-cache entry to store (SPEC 18): its name (CacheKey), its
	// encoding and its TTL; written by the writer ("" = none).
	CacheKey   string
	CacheValue []byte
	CacheTTL   time.Duration

	Audit *telemetry.Entry // stored in the audit log (nil = none)
}

// Charge is what a served request is charged (SPEC 3, 14): the upstream's
// usage when it reported any; otherwise the prompt estimate plus the output
// estimated from the content characters relayed (characters/4, rounded up,
// at most outputLimit when that is set), never zero.
func Charge(promptEstimate int, prompt, completion int, contentChars int64, outputLimit int) (int, int) {
	if prompt > 0 || completion > 0 {
		return prompt, completion
	}
	out := int((contentChars + 3) / 4)
	if outputLimit > 0 {
		out = min(out, outputLimit)
	}
	return promptEstimate, out
}

// limited reports whether t has any limit (a team without limits costs no
// admission work at all).
func limited(t *catalog.Team) bool {
	return t.RPM > 0 || t.TPM > 0 || t.MaxParallel > 0 || t.Budget.USD > 0
}
