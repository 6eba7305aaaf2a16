package ratelimit

import (
	"context"
	"testing"

	"switchyard/internal/teamtest"
)

// TestLocalDivisor: the fallback enforces limit/expected_replicas.
func TestLocalDivisor(t *testing.T) {
	clk := newFakeClock()
	l := NewLocal(clk.Now, 3)
	team := teamtest.Team("d", teamtest.Limits{RPM: 60, Par: 2, TPM: 3000})
	n := 0
	for i := range 100 {
		if d, _ := l.Admit(context.Background(), Admission{RequestID: reqID(i), Team: team}); d.Allowed {
			n++
			l.Release(d.Ticket)
		}
	}
	if n != 20 {
		t.Fatalf("rpm 60 over 3 replicas: %d admitted, want 20", n)
	}
	// max_parallel 2 over 3 replicas still allows one.
	d, _ := l.Admit(context.Background(), Admission{RequestID: "x", Team: teamtest.Team("p", teamtest.Limits{Par: 2})})
	d2, _ := l.Admit(context.Background(), Admission{RequestID: "y", Team: teamtest.Team("p", teamtest.Limits{Par: 2})})
	if !d.Allowed || d2.Allowed {
		t.Fatalf("par 2 / 3 replicas: %v %v, want one slot", d.Allowed, d2.Allowed)
	}
}
