// Package ratelimit owns the arithmetic of team limits and deployment quotas
// (SPEC 3, 9): RPM, TPM (estimate reserved at admission, reconciled with the
// real usage), max_parallel slots and spend budgets. Local is the node-local
// limiter (GCRA on an injected clock): the only limiter without Redis and the
// fallback when Redis is unreachable; the cluster-wide script that mirrors it
// on Redis's clock belongs to package edge, which owns the round trip. It
// also counts per-deployment usage for quotas and the usage strategy. It
// imports redis, cluster and catalog, never gin or routing.
//
// Limits are continuous (GCRA), not fixed windows: a team with rpm N may send
// N requests at once, after which capacity returns at N/60 per second.
package ratelimit

import (
	"time"

	"switchyard/catalog"
)

// Window is the period RPM and TPM are defined over; it is also the burst a
// limit allows: a full minute's quota at once.
const Window = time.Minute

// DefaultSlotTTL is the backstop expiry of a node-local max_parallel slot:
// the default server.request_timeout (10m) plus a margin. A slot is released
// on every exit path; the TTL only matters if a release is lost.
const DefaultSlotTTL = 11 * time.Minute

// ParallelRetry is the Retry-After of a max_parallel rejection: nobody knows
// when an in-flight request ends, so the client is told to try again soon.
const ParallelRetry = time.Second

// Kinds of rejection, the Decision.Kind values (and the label of
// switchyard_edge_rejections_total).
const (
	KindRPM      = "rpm"
	KindTPM      = "tpm"
	KindParallel = "parallel"
	KindBudget   = "budget"
)

// Kinds maps the numeric kind codes of the limiter and the scripts (1 rpm,
// 2 tpm, 3 parallel, 4 budget) to names.
var Kinds = [...]string{"", KindRPM, KindTPM, KindParallel, KindBudget}

// Admission is one request at the edge.
type Admission struct {
	RequestID string        // the request id (X-Request-Id); slots get ids of their own, unique even when clients reuse one
	Team      *catalog.Team // the authenticated team with its limits
	Tokens    int64         // estimated prompt + output tokens, reserved against TPM
	// CostUSD is the request's highest possible cost, reserved against the
	// budget and reconciled to the real cost (SPEC 3.1); 0 reserves nothing.
	CostUSD float64
	// Levels are the request's key and end-user levels (SPEC 3.1), in that
	// order; a Level without Limits is absent.
	Levels [2]Level
	// HeldUSD is what the shared limiter reserved against the team's budget
	// for this node's requests still running (admitted in Redis before it
	// became unreachable): their cost comes to the local spend only when
	// they end (Spend), so the fallback counts it against its share until
	// then (SPEC 3.1, 9). 0: none.
	HeldUSD float64
	// HeldSlots are the team's max_parallel slots the shared limiter holds
	// for this node's requests still running (admitted in Redis before it
	// became unreachable): the fallback counts them beside its own (SPEC
	// 3, 9). 0: none.
	HeldSlots int64
	// Until is the request's deadline (server.request_timeout): its
	// max_parallel slots' backstop expiry is SlotMargin past it, or
	// DefaultSlotTTL (SetSlotTTL) from now when that is later. Zero: the
	// latter alone.
	Until time.Time
}

// SlotMargin is how long past its request's deadline a node-local
// max_parallel slot is kept when its release is lost (Admission.Until).
const SlotMargin = time.Minute

// Decision is the verdict on an Admission with the values of the OpenAI
// x-ratelimit-* headers. A Limit of 0 means the dimension is unlimited (send
// no header for it). Remaining counts what is left after this request;
// Reset is the time until the dimension is back to its full quota.
type Decision struct {
	Allowed    bool
	Kind       string        // when rejected: "rpm" | "tpm" | "parallel" | "budget"
	RetryAfter time.Duration // when rejected: the wait until this request would fit
	Level      int           // when rejected: the level that binds, 0 team, 1 key, 2 user

	// The header values are the level with the least remaining, per
	// dimension (SPEC 3.1).

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

	// lv is the levels' part, made only for an admitted request: a Ticket
	// sits in every request's state, admitted locally or not.
	lv *ticketLevels
}

// ticketLevels are the levels of an admission, the first n.
type ticketLevels struct {
	l [3]levelTicket
	n int
}

// IsZero reports whether t is the zero Ticket (nothing to release).
func (t Ticket) IsZero() bool { return t.Team == "" }

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

// Unlimited reports whether t has no limit at all: such a team never costs a
// Redis round trip.
func Unlimited(t *catalog.Team) bool {
	return t.RPM <= 0 && t.TPM <= 0 && t.MaxParallel <= 0 && t.Budget.USD <= 0
}

// unlimitedDecision admits a team without limits.
func unlimitedDecision(a Admission) Decision {
	return Decision{Allowed: true, Ticket: Ticket{Team: a.Team.Name, RequestID: a.RequestID}}
}

// Reservation is the TPM charge of an estimate: never negative, and capped at
// the limit so a request larger than a whole minute's quota can still run
// when the bucket is full (its real usage is charged at reconcile).
func Reservation(tokens, tpm int64) int64 {
	if tokens < 0 {
		return 0
	}
	if tpm > 0 && tokens > tpm {
		return tpm
	}
	return tokens
}

var _ Observer = NopObserver{}
