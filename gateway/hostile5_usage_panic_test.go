package gateway

import (
	"context"
	"testing"
	"time"

	"switchyard/edge"
)

// A read of GET /admin/usage that panics (a bug in the edge state's read;
// gin's recovery answers its request 500) must not leave its query marked
// "in flight" for good: every later ask of the same query (the console
// asks it every 15 s) would wait for a read that never ends, until its own
// context gave up, and never read again until the node restarted.
func TestHostile5UsageReadPanicDoesNotWedgeQuery(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	u := newUsageReads(func() time.Time { return now })
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("the read's panic did not reach the caller (gin's recovery)")
			}
		}()
		_, _ = u.get(context.Background(), "q", func(context.Context) (edge.UsageReport, error) { panic("bug in the read") })
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	rep, err := u.get(ctx, "q", func(context.Context) (edge.UsageReport, error) {
		return edge.UsageReport{Rows: make([]edge.UsageRow, 3)}, nil
	})
	if err != nil || len(rep.Rows) != 3 {
		t.Fatalf("the ask after a panicked read: %d rows, %v; want a new read's 3 rows", len(rep.Rows), err)
	}
}
