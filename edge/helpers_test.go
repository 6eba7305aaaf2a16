package edge

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"switchyard/catalog"
	"switchyard/internal/fakeclock"
	"switchyard/internal/redistest"
)

// TestMain silences go-redis's dial-failure log lines, which the fault tests
// provoke by the hundred.
func TestMain(m *testing.M) {
	redistest.QuietLogs()
	os.Exit(m.Run())
}

func newFakeClock() *fakeclock.Clock { return fakeclock.New(time.Unix(1_700_000_000, 0)) }

// countObs counts Observer events.
type countObs struct {
	fallbacks, dropped, audit atomic.Int64
	mu                        sync.Mutex
	writeErrs                 []string // teams whose writes Redis rejected
}

func (o *countObs) OnWriteError(team, _ string) {
	o.mu.Lock()
	o.writeErrs = append(o.writeErrs, team)
	o.mu.Unlock()
}

func (o *countObs) OnFallback(string) { o.fallbacks.Add(1) }
func (o *countObs) OnDropped(kind string, n int) {
	if kind == "audit" {
		o.audit.Add(int64(n))
		return
	}
	o.dropped.Add(int64(n))
}

func reqID(i int) string { return fmt.Sprintf("req-%d", i) }

// begin admits one request of tokens for team.
func begin(t testing.TB, st State, team *catalog.Team, tokens int64) Begun {
	t.Helper()
	b, err := st.Begin(context.Background(), &Request{RequestID: "r", Team: team, Tokens: tokens})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// waitQueued waits (at most 5 s) until n admissions are queued in cb
// behind the call in flight.
func waitQueued(t testing.TB, cb *combiner, n int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		cb.mu.Lock()
		q := len(cb.queue)
		cb.mu.Unlock()
		if q == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d admissions queued", q, n)
		}
	}
}
