// Package edge owns the edge state of SPEC 3 and 9: the per-request
// conversation with the shared state, behind one interface. Begin decides
// the admission (team RPM, TPM, max_parallel, budget) and reads only the
// session pins this request can use, in one Redis round trip; Finish hands
// the outcome (reconcile, slot release, pin writes, usage, audit entry) to
// one background writer and never blocks. A Redis and a local
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
	// Shared reports whether decisions are currently taken in Redis.
	Shared() bool
	// Usage reads the team's live state against its limits for the admin
	// API (cluster-wide when Redis answers); never called on the request path.
	Usage(ctx context.Context, t *catalog.Team) (TeamUsage, error)
	// Close flushes what the writer holds, bounded by ctx.
	Close(ctx context.Context) error
	// SetBudgetAlert names what is called once per team and budget period
	// when the team's spend crosses budget.alert_at (SPEC 3.1): once for
	// the cluster with Redis, once per node local-only. Set before use.
	SetBudgetAlert(fn func(team string))
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
	Pins    PinQuery
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

	q      PinQuery
	team   *catalog.Team
	ts     *teamState // the Redis state's record of team (looked up once per request)
	tokens int64      // the estimate at admission
	t      ticket
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
func (b *Begun) Limited() bool { return b.team != nil && limited(b.team) }

// ticket is what Finish needs to undo or correct an admission.
type ticket struct {
	admitted bool    // a limited team was admitted: Finish reconciles
	local    bool    // the local limiter decided (Redis unreachable or absent)
	slot     string  // Redis slot id ("" without max_parallel or when local)
	reserved int64   // tokens reserved against TPM
	end      int64   // TPM TAT right after this reservation (Redis µs); bounds refunds
	usd      float64 // reserved against the budget (its highest possible cost)
	window   int64   // the budget window of that reservation
	lt       ratelimit.Ticket
	released bool // the local slot was released by Release
	// remote is a slot the admission script may have taken although it
	// failed in an unknown state (a timeout): Finish removes it in Redis too.
	remote string
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
