package routing

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"switchyard/catalog"
)

func BenchmarkAdaptiveSelect(b *testing.B) {
	for _, n := range []int{2, 8, 64} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			h := newHarness(&testing.T{}, testConfig())
			var deps []*catalog.Deployment
			for i := range n {
				d := dep(fmt.Sprintf("d%02d", i), "m", price(float64(i%5+1), float64(i%3+1)), weight(float64(i%4+1)))
				deps = append(deps, d)
				h.setLatency(d.ID, time.Duration(50+i*7)*time.Millisecond)
				h.r.State(d.ID).inflight.Store(int64(i % 3))
			}
			p := h.pickOf(&catalog.Model{Name: "m", Strategy: "adaptive", Objective: "balanced"}, deps...)
			p.Warm = "d01"
			sel := NewAdaptive(testConfig())
			sel.Select(p) // size the scratch once
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				sel.Select(p)
			}
		})
	}
}

// One request's routing: Plan, Next, Done on a three-deployment pool.
func BenchmarkPlanCycle(b *testing.B) {
	for _, strategy := range []string{"simple_shuffle", "adaptive"} {
		b.Run(strategy, func(b *testing.B) {
			r := NewRouter(testConfig(), SystemClock{}, 1, NopObserver{}, nil)
			s := snap(map[string]string{"m": strategy}, dep("a", "m", price(1, 2)), dep("b", "m", price(2, 3)), dep("c", "m"))
			in := PlanInput{Snapshot: s, Model: "m", MaxAttempts: 6, Profile: Profile{Op: catalog.OpChat, PromptTokens: 500, OutputTokens: 200}}
			o := Outcome{Status: 200, Class: ClassOK, Latency: 80 * time.Millisecond}
			b.ReportAllocs()
			for b.Loop() {
				p, err := r.Plan(in)
				if err != nil {
					b.Fatal(err)
				}
				a, _ := p.Next()
				a.Done(o)
				_ = p.Result()
			}
		})
	}
}

// Many requests at once on shared live state, with catalog swaps and health
// reads: run under -race.
func TestConcurrentPlans(t *testing.T) {
	r := NewRouter(testConfig(), SystemClock{}, 1, &recorder{}, nil)
	s := snap(map[string]string{"m": "adaptive", "f": "least_busy"}, dep("a", "m"), dep("b", "m", rpm(1000)), dep("c", "m"), dep("x", "f"))
	chain(s, "m", catalog.ReasonGeneral, "f")
	classes := []Class{ClassOK, ClassServerError, ClassRateLimited, ClassTimeout, ClassOK, ClassCanceled, ClassContextWindow}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 300 {
				p, err := r.Plan(PlanInput{Snapshot: s, Model: "m", MaxAttempts: 4, Session: fmt.Sprint("s", i%7), SessionDeployment: "a"})
				if err != nil {
					t.Error(err)
					return
				}
				for k := 0; ; k++ {
					a, ok := p.Next()
					if !ok {
						break
					}
					a.Done(Outcome{Class: classes[(g+i+k)%len(classes)], Latency: time.Duration(i%50+1) * time.Millisecond})
				}
				_ = p.Result()
			}
		}()
	}
	for range 50 {
		r.Sync(s)
		_ = r.Health(time.Now())
	}
	wg.Wait()
	for _, h := range r.Health(time.Now()) {
		if h.InFlight != 0 {
			t.Errorf("%s: %d still in flight", h.ID, h.InFlight)
		}
	}
}
