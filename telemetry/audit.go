package telemetry

import (
	"context"
	"time"

	"switchyard/redact"
)

// Attempt is one upstream attempt in the timeline (SPEC 7.6).
type Attempt struct {
	Deployment string        `json:"deployment"`
	Model      string        `json:"model"`
	Adapter    string        `json:"adapter"`
	Transport  string        `json:"transport"`
	Start      time.Time     `json:"start"`
	Duration   time.Duration `json:"duration_ns"`
	Status     int           `json:"status"`
	Class      string        `json:"class"`
	Fallback   bool          `json:"fallback,omitempty"`
	LastResort bool          `json:"last_resort,omitempty"`
	Probe      bool          `json:"probe,omitempty"`
	Error      string        `json:"error,omitempty"`
}

// Signal is one smart-routing signal that fired.
type Signal struct {
	Name   string `json:"name"`
	Points int    `json:"points"`
	Detail string `json:"detail,omitempty"`
}

// TierVerdict is the smart-routing decision with its reasons (SPEC 4).
type TierVerdict struct {
	Alias   string   `json:"alias"`
	Tier    string   `json:"tier"`
	Score   int      `json:"score"`
	Source  string   `json:"source"`
	Target  string   `json:"target"`
	Signals []Signal `json:"signals,omitempty"`
}

// Entry is the audit record of one request (SPEC 12.2).
type Entry struct {
	RequestID        string       `json:"request_id"`
	Node             string       `json:"node"`
	Time             time.Time    `json:"time"`
	Team             string       `json:"team"`
	Key              string       `json:"key,omitempty"`  // the id of the key it authenticated with (never the key)
	User             string       `json:"user,omitempty"` // the end user the request named (SPEC 3.1)
	Operation        string       `json:"operation"`
	Stream           bool         `json:"stream"`
	RequestedModel   string       `json:"requested_model"`
	RoutedModel      string       `json:"routed_model,omitempty"`
	Deployment       string       `json:"deployment,omitempty"`
	Tier             *TierVerdict `json:"tier,omitempty"`
	Session          string       `json:"session_source,omitempty"`
	Attempts         []Attempt    `json:"attempts"`
	FallbackReason   string       `json:"fallback_reason,omitempty"`
	Degraded         bool         `json:"degraded"`
	PromptTokens     int          `json:"prompt_tokens"`                // every input token, cached ones included
	CachedTokens     int          `json:"cached_tokens,omitempty"`      // part of PromptTokens read from the prompt cache
	CacheWriteTokens int          `json:"cache_write_tokens,omitempty"` // part of PromptTokens written to the prompt cache
	CompletionTokens int          `json:"completion_tokens"`            // reasoning tokens included
	CostUSD          float64      `json:"cost_usd"`                     // SPEC 10.2
	Cached           bool         `json:"cached,omitempty"`             // answered from the response cache (SPEC 18)
	SavedUSD         float64      `json:"saved_usd,omitempty"`          // what a cached answer would have cost
	Status           int          `json:"status"`
	Error            string       `json:"error,omitempty"`
	DurationMs       float64      `json:"duration_ms"`
	OverheadMs       float64      `json:"overhead_ms"`

	// raw is the entry's JSON as the ring keeps it (Ring.Record), which
	// the stream's writer sends as it is; nil until recorded.
	raw []byte
}

// Filter selects audit entries; zero fields match everything.
type Filter struct {
	RequestID string // X-Request-Id (clients may reuse one: every entry with it matches)
	Team      string
	Model     string // requested or routed public model
	Status    int
	Limit     int // at most this many, newest first (<= 0: DefaultLimit)
}

// DefaultLimit is the number of entries Recent returns when the filter sets none.
const DefaultLimit = 100

// maxLimit bounds one answer.
const maxLimit = 10_000

func (f *Filter) limit() int {
	if f.Limit <= 0 {
		return DefaultLimit
	}
	return min(f.Limit, maxLimit)
}

// masked is f as a stored entry reads: the client-chosen values it
// filters by (request id, model named) masked as AppendJSON masks them
// (SPEC 15), so a lookup by the id the client was answered finds an entry
// whose id is shaped like a credential. Two such ids that mask alike match
// each other's entries where only the masked values are stored (the shared
// stream's fields); the ring tells them apart by hash.
func (f Filter) masked() Filter {
	f.RequestID, f.Model = redact.Credentials(f.RequestID), redact.Credentials(f.Model)
	return f
}

// Match reports whether e passes the filter.
func (f *Filter) Match(e *Entry) bool {
	return (f.RequestID == "" || e.RequestID == f.RequestID) &&
		(f.Team == "" || e.Team == f.Team) &&
		(f.Model == "" || e.RequestedModel == f.Model || e.RoutedModel == f.Model) &&
		(f.Status == 0 || e.Status == f.Status)
}

// AuditLog reads stored audit entries (SPEC 12.2). Entries are written by
// the node's edge state (package edge). Entries are never overwritten: a
// reused request id names several entries, possibly of several teams
// (SPEC 15), and a lookup returns all of them; a team's request can never
// hide another team's entry.
type AuditLog interface {
	// Lookup returns every entry with this request id, newest first.
	Lookup(ctx context.Context, requestID string) ([]*Entry, error)
	// Recent returns the newest entries that pass f, newest first.
	Recent(ctx context.Context, f Filter) ([]*Entry, error)
}
