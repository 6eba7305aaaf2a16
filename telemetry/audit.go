package telemetry

import (
	"context"
	"sync"
	"time"
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
	PromptTokens     int          `json:"prompt_tokens"`
	CompletionTokens int          `json:"completion_tokens"`
	CostUSD          float64      `json:"cost_usd"`
	Status           int          `json:"status"`
	Error            string       `json:"error,omitempty"`
	DurationMs       float64      `json:"duration_ms"`
	OverheadMs       float64      `json:"overhead_ms"`
}

// AuditLog stores audit entries and finds them by request id.
type AuditLog interface {
	Record(e *Entry)
	Get(ctx context.Context, requestID string) (*Entry, bool, error)
}

// Ring is the bounded in-memory audit log used without Redis. The oldest
// entry is overwritten when it is full.
type Ring struct {
	mu    sync.Mutex
	buf   []*Entry          // guarded by mu
	next  int               // guarded by mu
	index map[string]*Entry // guarded by mu
}

// NewRing returns a ring holding at most size entries.
func NewRing(size int) *Ring {
	if size < 1 {
		size = 1
	}
	return &Ring{buf: make([]*Entry, size), index: make(map[string]*Entry, size)}
}

// Record stores e, evicting the oldest entry when full.
func (r *Ring) Record(e *Entry) {
	r.mu.Lock()
	if old := r.buf[r.next]; old != nil && r.index[old.RequestID] == old {
		delete(r.index, old.RequestID)
	}
	r.buf[r.next] = e
	r.index[e.RequestID] = e
	r.next = (r.next + 1) % len(r.buf)
	r.mu.Unlock()
}

// Get returns the entry for requestID.
func (r *Ring) Get(_ context.Context, requestID string) (*Entry, bool, error) {
	r.mu.Lock()
	e, ok := r.index[requestID]
	r.mu.Unlock()
	return e, ok, nil
}

var _ AuditLog = (*Ring)(nil)
