package ratelimit

import (
	"context"
	"math"
	"testing"

	"switchyard/internal/teamtest"
)

// An upstream's usage is distrusted input: a reconcile that charges more
// tokens than int64 nanoseconds of TAT can hold (a buggy or hostile
// upstream reporting 2^40 or 2^62 tokens) must saturate and hold the team
// back, not wrap the TAT around into the past and hand it a full bucket.
func TestHostile4ReconcileHugeUsageSaturates(t *testing.T) {
	for _, actual := range []int64{1 << 40, 1 << 62, math.MaxInt64} {
		clk := newFakeClock()
		l := NewLocal(clk.Now, 1)
		team := teamtest.Team("o", teamtest.Limits{TPM: 1000})
		ctx := context.Background()
		d, _ := l.Admit(ctx, Admission{RequestID: "1", Team: team, Tokens: 10})
		if !d.Allowed {
			t.Fatal("first request refused")
		}
		l.Reconcile(d.Ticket, actual, 0)
		if d, _ := l.Admit(ctx, Admission{RequestID: "2", Team: team, Tokens: 10}); d.Allowed {
			t.Fatalf("usage %d on tpm 1000 charged: the next request was admitted (TAT wrapped)", actual)
		}
	}
}

func TestHostile4IntervalSaturates(t *testing.T) {
	if got := interval(math.MaxInt64, 1); got <= 0 {
		t.Fatalf("interval(MaxInt64, 1) = %d, want a large positive value", got)
	}
	if got := gcraAdjust(1_700_000_000e9, 1_700_000_000e9, 1, math.MaxInt64); got <= 0 {
		t.Fatalf("gcraAdjust wrapped to %d", got)
	}
}
