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

// TestLocalForget: Forget drops a team's state (its map entry), and the
// name's next admission starts from full buckets.
func TestLocalForget(t *testing.T) {
	l := NewLocal(newFakeClock().Now, 1)
	team := teamtest.Team("f", teamtest.Limits{RPM: 1})
	if d, _ := l.Admit(context.Background(), Admission{RequestID: "1", Team: team}); !d.Allowed {
		t.Fatal("first request refused")
	}
	if d, _ := l.Admit(context.Background(), Admission{RequestID: "2", Team: team}); d.Allowed {
		t.Fatal("rpm 1 admitted a second request")
	}
	l.Forget("f")
	if _, ok := l.teams.Load("f"); ok {
		t.Fatal("the team's state is still held after Forget")
	}
	if d, _ := l.Admit(context.Background(), Admission{RequestID: "3", Team: team}); !d.Allowed {
		t.Fatal("after Forget the team's buckets did not start full")
	}
}
