package ratelimit

import (
	"context"
	"testing"
	"time"

	"switchyard/config"
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

// TestMirrorSubAtRest: a shared answer that leaves a key or user level's
// buckets full within the GCRA's tolerance makes no local state for it (a
// level far from its limits costs the node nothing per admission), a level
// that has state still learns it, and a larger reset makes state that holds
// the fallback back until it has passed.
func TestMirrorSubAtRest(t *testing.T) {
	clk := newFakeClock()
	l := NewLocal(clk.Now, 1)
	lim := &config.Limits{RPM: 2}
	lv := Level{Key: "k:a:", Name: "a", Limits: lim}
	held := func() bool { _, ok := l.subs.Load(lv.Key); return ok }

	l.MirrorSub(lv, time.Microsecond, time.Microsecond)
	if held() || l.nsubs.Load() != 0 {
		t.Fatal("a reset within tolerance made local state for a level at rest")
	}

	// a real reset: the level is at its limit for 30 s (rpm 2: one request
	// in the bucket per 30 s), so the fallback admits one more, not two
	l.MirrorSub(lv, 30*time.Second, 0)
	if !held() {
		t.Fatal("a 30 s reset made no local state")
	}
	team := teamtest.Team("m", teamtest.Limits{})
	admit := func(id string) bool {
		d, err := l.Admit(context.Background(), Admission{RequestID: id, Team: team, Levels: [2]Level{lv}})
		if err != nil {
			t.Fatal(err)
		}
		return d.Allowed
	}
	if !admit("1") || admit("2") {
		t.Fatal("after a 30 s mirror at rpm 2 the fallback did not admit exactly one")
	}

	// a level with state learns even a reset within tolerance
	clk.Advance(2 * time.Minute)
	l.MirrorSub(lv, time.Microsecond, 0)
	st, _ := l.subs.Load(lv.Key)
	if got, want := st.rpmTAT, clk.Now().UnixNano()+int64(time.Microsecond); got != want {
		t.Fatalf("rpm TAT %d after a 1 µs mirror, want %d", got, want)
	}
}
