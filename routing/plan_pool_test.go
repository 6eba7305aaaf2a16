package routing

import (
	"reflect"
	"testing"

	"switchyard/catalog"
)

// TestReleasedPlan: Release empties the plan it pools, so nothing of its
// request (snapshot, session, timeline) stays reachable from the pool, and
// plans taken after a long walk was released start as new ones: one
// attempt on the primary pool, a timeline of their own.
func TestReleasedPlan(t *testing.T) {
	h := newHarness(t, testConfig())
	s := snap(nil, dep("A", "gpt"), dep("B", "gpt"), dep("C", "fb1"))
	chain(s, "gpt", catalog.ReasonGeneral, "fb1")
	long := h.plan(s, "gpt", func(in *PlanInput) { in.Session = "team/s" })
	order := run(long, func(id string, _ int) Outcome {
		if id == "C" {
			return ok()
		}
		return fail(ClassBadRequest, 400) // non-retryable: the pool is exhausted, the chain serves
	})
	if res := long.Result(); len(order) != 3 || !res.Degraded || len(res.Timeline) != 3 {
		t.Fatalf("the long walk: %v, %+v", order, res)
	}
	long.Release()
	// only this goroutine uses the pool, so the released plan may be read
	if v := reflect.ValueOf(long).Elem(); !v.IsZero() {
		t.Fatalf("a released plan still holds its request: %+v", long)
	}
	for range 20 { // the pool hands back any plan it holds (and drops some under -race)
		p := h.plan(s, "gpt")
		a, more := p.Next()
		if !more || a.N != 1 || a.Fallback || a.Model != "gpt" {
			t.Fatalf("first attempt %+v", a)
		}
		a.Done(ok())
		if res := p.Result(); len(res.Timeline) != 1 || res.Degraded || res.Reason != "" || res.Attempts != 1 || res.Timeline[0].Model != "gpt" {
			t.Fatalf("a plan from the pool: %+v", res)
		}
		p.Release()
	}
}
