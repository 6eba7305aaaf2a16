package routing

import "testing"

// An attempt the gateway gives up before sending (the retry_after wait
// before it would pass the request's deadline) is withdrawn: it is not in
// the plan's count or timeline, its deployment is not left in flight and
// gets no outcome, and the plan is over.
func TestFix5WithdrawUnsentAttempt(t *testing.T) {
	h := newHarness(t, testConfig())
	s := snap(nil, dep("A", "m"), dep("B", "m"))
	p := h.plan(s, "m")
	a, _ := p.Next()
	a.Done(fail(ClassServerError, 503))
	b, more := p.Next()
	if !more || b.Deployment.ID == a.Deployment.ID {
		t.Fatalf("second attempt %v %v, want the other deployment", more, b)
	}
	b.Withdraw()
	b.Withdraw() // twice: nothing more
	b.Done(ok()) // after: ignored
	a.Withdraw() // a Done attempt: ignored
	if _, more = p.Next(); more {
		t.Fatal("Next after Withdraw handed out another attempt")
	}
	res := p.Result()
	if res.Attempts != 1 || len(res.Timeline) != 1 || res.Timeline[0].Deployment != a.Deployment.ID || res.Served != nil {
		t.Fatalf("result %+v, want only the attempt sent", res)
	}
	if n := h.r.State(b.Deployment.ID).InFlight(); n != 0 {
		t.Fatalf("%s in flight %d after Withdraw", b.Deployment.ID, n)
	}
	if n := h.obs.count("outcome " + b.Deployment.ID); n != 0 {
		t.Fatalf("%d outcomes reported for the withdrawn attempt", n)
	}
}
