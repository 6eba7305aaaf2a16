// Package ratelimit owns team limits at the edge and deployment quotas
// (SPEC 3, 9): RPM, TPM (estimate reserved at admission, reconciled with the
// real usage), max_parallel slots and spend budgets, enforced cluster-wide by
// one Lua script per admission on Redis's clock, with a node-local GCRA as
// the fallback when Redis is unreachable and as the only limiter when Redis is
// not configured. It also counts per-deployment usage for quotas and the
// usage strategy. It imports redis, cluster and catalog, never gin or routing.
//
// Limits are continuous (GCRA), not fixed windows: a team with rpm N may send
// N requests at once, after which capacity returns at N/60 per second.
package ratelimit

import (
	"context"
	"time"

	"switchyard/catalog"
)

// Window is the period RPM and TPM are defined over; it is also the burst a
// limit allows: a full minute's quota at once.
const Window = time.Minute

// DefaultSlotTTL is the backstop expiry of a max_parallel slot: the default
// server.request_timeout (10m) plus a margin. A slot is released on every
// exit path; the TTL only matters if a process dies holding one.
const DefaultSlotTTL = 11 * time.Minute

// parallelRetry is the Retry-After of a max_parallel rejection: nobody knows
// when an in-flight request ends, so the client is told to try again soon.
const parallelRetry = time.Second

// Kinds of rejection, the Decision.Kind values (and the label of
// switchyard_edge_rejections_total).
const (
	KindRPM      = "rpm"
	KindTPM      = "tpm"
	KindParallel = "parallel"
	KindBudget   = "budget"
)

// kinds maps the scripts' numeric kind codes to names.
var kinds = [...]string{"", KindRPM, KindTPM, KindParallel, KindBudget}

// Admission is one request at the edge.
type Admission struct {
	RequestID string        // the request id (X-Request-Id); slots get ids of their own, unique even when clients reuse one
	Team      *catalog.Team // the authenticated team with its limits
	Tokens    int64         // estimated prompt + output tokens, reserved against TPM
}

// Decision is the verdict on an Admission with the values of the OpenAI
// x-ratelimit-* headers. A Limit of 0 means the dimension is unlimited (send
// no header for it). Remaining counts what is left after this request;
// Reset is the time until the dimension is back to its full quota.
type Decision struct {
	Allowed    bool
	Kind       string        // when rejected: "rpm" | "tpm" | "parallel" | "budget"
	RetryAfter time.Duration // when rejected: the wait until this request would fit

	LimitRequests, RemainingRequests int64
	ResetRequests                    time.Duration
	LimitTokens, RemainingTokens     int64
	ResetTokens                      time.Duration

	// Ticket is non-zero when Allowed: what Release and Reconcile need.
	Ticket Ticket
}

// Ticket records an admission so it can be released and reconciled. It is a
// value; releasing a copy twice is harmless (slots are removed by id).
type Ticket struct {
	Team      string // team name; "" for the zero Ticket
	RequestID string
	Slot      string // max_parallel slot id, "" when the team has no max_parallel
	Reserved  int64  // tokens reserved against TPM (the estimate, capped at the limit)
	// Local is set when the node-local limiter granted the admission
	// (Redis unreachable, or no Redis at all): Release and Reconcile go to it.
	Local bool

	team *catalog.Team // limits at admission
	// remoteSlot is set on a Local ticket whose Redis call failed in an
	// unknown state (a timeout): the script may have taken this Redis slot,
	// which Release then also removes.
	remoteSlot string
}

// IsZero reports whether t is the zero Ticket (nothing to release).
func (t Ticket) IsZero() bool { return t.Team == "" }

// Limiter enforces team limits (SPEC 3).
type Limiter interface {
	// Admit checks RPM, TPM (reserving a.Tokens), a max_parallel slot and the
	// budget together, atomically: either every dimension is charged or none.
	// It never waits longer than the configured Redis timeout. The error is
	// non-nil only for a broken Admission (nil team); an unreachable Redis is
	// a fallback, not an error.
	Admit(ctx context.Context, a Admission) (Decision, error)
	// Release frees the ticket's parallel slot. Every exit path of an admitted
	// request calls it exactly once; extra calls and the zero Ticket are no-ops.
	Release(t Ticket)
	// Reconcile replaces the ticket's TPM reservation by actualTokens
	// (refunding or charging the difference) and adds costUSD to the team's
	// budget spend. It does not block: Redis writes are batched.
	Reconcile(t Ticket, actualTokens int64, costUSD float64)
	// Close flushes pending writes, bounded by ctx; what could not be written
	// is counted as dropped and reported as ctx's error.
	Close(ctx context.Context) error
}

// Observer is told about the events the gateway turns into metrics
// (switchyard_redis_fallback_total, edge rejections). Calls are synchronous
// and must be cheap.
type Observer interface {
	OnFallback(component string) // a Redis call failed and local state answered
	OnDropped(n int)             // n usage deltas could not be written and were lost
	OnReject(team, kind string)  // an admission was rejected
}

// NopObserver ignores every event.
type NopObserver struct{}

// OnFallback implements Observer.
func (NopObserver) OnFallback(string) {}

// OnDropped implements Observer.
func (NopObserver) OnDropped(int) {}

// OnReject implements Observer.
func (NopObserver) OnReject(string, string) {}

// unlimited reports whether t has no limit at all: such a team never costs a
// Redis round trip.
func unlimited(t *catalog.Team) bool {
	return t.RPM <= 0 && t.TPM <= 0 && t.MaxParallel <= 0 && t.Budget.USD <= 0
}

// unlimitedDecision admits a team without limits.
func unlimitedDecision(a Admission, local bool) Decision {
	return Decision{Allowed: true, Ticket: Ticket{Team: a.Team.Name, RequestID: a.RequestID, Local: local, team: a.Team}}
}

// budgetPeriod is the team's budget period (default 720h, SPEC 13).
func budgetPeriod(t *catalog.Team) time.Duration {
	if t.Budget.Period > 0 {
		return t.Budget.Period
	}
	return 720 * time.Hour
}

// reservation is the TPM charge of an estimate: never negative, and capped at
// the limit so a request larger than a whole minute's quota can still run
// when the bucket is full (its real usage is charged at reconcile).
func reservation(tokens, tpm int64) int64 {
	if tokens < 0 {
		return 0
	}
	if tpm > 0 && tokens > tpm {
		return tpm
	}
	return tokens
}

var (
	_ Observer = NopObserver{}
	_ Limiter  = (*Local)(nil)
	_ Limiter  = (*Redis)(nil)
)
