package routing

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"switchyard/catalog"
)

// Round robin is even per candidate set (SPEC 5 `round_robin`: next in
// turn): requests whose candidate sets differ (tools requests that only some
// deployments serve, interleaved with plain ones) each rotate over their own
// set, whatever the interleaving. One counter shared by the model skewed
// this: with plain and tools requests alternating on {A,B,C} and {A,B},
// every tools request drew an even turn and went to A.
func TestFix5RoundRobinEvenPerCandidateSet(t *testing.T) {
	for _, tc := range []struct {
		name    string
		pattern []bool // true: a tools request; repeated in order
	}{
		{"alternating", []bool{false, true}},
		{"two plain then tools", []bool{false, false, true}},
		{"tools then three plain", []bool{true, false, false, false}},
		{"plain then two tools", []bool{false, true, true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, testConfig())
			s := snap(nil, dep("A", "m"), dep("B", "m"), dep("C", "m", noTools()))
			served := map[bool]map[string]int{false: {}, true: {}}
			const rounds = 600
			for range rounds {
				for _, tools := range tc.pattern {
					id := h.serve(s, "m", latency100, func(in *PlanInput) { in.Profile.Tools = tools })
					served[tools][id]++
				}
			}
			for tools, want := range map[bool][]string{false: {"A", "B", "C"}, true: {"A", "B"}} {
				total := 0
				for _, id := range want {
					total += served[tools][id]
				}
				for _, id := range want {
					if got, even := served[tools][id], total/len(want); got < even-1 || got > even+1 {
						t.Errorf("tools=%v: %s served %d of %d, want %d±1 (%v)", tools, id, got, total, even, served[tools])
					}
				}
			}
		})
	}
}

// A retry excludes the deployment it tried: its smaller candidate set turns
// on its own, and the next request's rotation is not pushed off by it.
func TestFix5RoundRobinEvenWithRetries(t *testing.T) {
	h := newHarness(t, testConfig())
	s := snap(nil, dep("A", "m"), dep("B", "m"), dep("C", "m"))
	first := map[string]int{}
	for i := range 300 {
		p := h.plan(s, "m")
		a, _ := p.Next()
		first[a.Deployment.ID]++
		if i%2 == 0 { // every other request fails over once (a 400 says nothing about health)
			a.Done(fail(ClassBadRequest, 400))
			a, _ = p.Next()
		}
		a.Done(ok())
		p.Release()
	}
	for _, id := range []string{"A", "B", "C"} {
		if first[id] != 100 {
			t.Errorf("first attempts %v, want 100 each", first)
			break
		}
	}
}

// A config reload (Router.Reconfigure) keeps the turns: the request after it
// goes to the next deployment in turn, not back to the first.
func TestFix5RoundRobinReconfigureKeepsTurn(t *testing.T) {
	h := newHarness(t, testConfig())
	s := snap(nil, dep("A", "m"), dep("B", "m"), dep("C", "m"))
	var got []string
	for range 4 {
		got = append(got, h.serve(s, "m", latency100))
		h.r = h.r.Reconfigure(testConfig())
	}
	if want := []string{"A", "B", "C", "A"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("served %v across reloads, want %v", got, want)
	}
}

// Many goroutines on two interleaved sets: each set's rotation is exact
// (run under -race).
func TestFix5RoundRobinConcurrent(t *testing.T) {
	h := newHarness(t, testConfig())
	rr := &RoundRobin{}
	deps := []*catalog.Deployment{dep("A", "m"), dep("B", "m"), dep("C", "m")}
	const per = 600
	var (
		mu  sync.Mutex
		got = map[int]map[string]int{2: {}, 3: {}}
		wg  sync.WaitGroup
	)
	for g := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := 2 + g%2
			p := h.pickOf(nil, deps[:n]...)
			local := map[string]int{}
			for range per {
				local[p.Candidates[rr.Select(p)].Deployment.ID]++
			}
			mu.Lock()
			for id, c := range local {
				got[n][id] += c
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	for n, counts := range got {
		for _, d := range deps[:n] {
			if c := counts[d.ID]; c != 3*per/n {
				t.Errorf("set of %d: %v, want %d each", n, counts, 3*per/n)
				break
			}
		}
	}
}

func latency100(string) time.Duration { return 100 * time.Millisecond }

func BenchmarkRoundRobinSelect(b *testing.B) {
	for _, n := range []int{2, 8} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			h := newHarness(&testing.T{}, testConfig())
			var deps []*catalog.Deployment
			for i := range n {
				deps = append(deps, dep(fmt.Sprintf("deployment-%02d", i), "m"))
			}
			p := h.pickOf(&catalog.Model{Name: "m", Strategy: "round_robin"}, deps...)
			rr := &RoundRobin{}
			b.ReportAllocs()
			for b.Loop() {
				rr.Select(p)
			}
		})
	}
}

func BenchmarkPlanCycleRoundRobin(b *testing.B) {
	r := NewRouter(testConfig(), SystemClock{}, 1, NopObserver{}, nil)
	s := snap(map[string]string{"m": "round_robin"}, dep("a", "m"), dep("b", "m"), dep("c", "m"))
	in := PlanInput{Snapshot: s, Model: "m", MaxAttempts: 6, Profile: Profile{Op: catalog.OpChat, PromptTokens: 500, OutputTokens: 200}}
	b.ReportAllocs()
	for b.Loop() {
		p, err := r.Plan(in)
		if err != nil {
			b.Fatal(err)
		}
		a, _ := p.Next()
		a.Done(ok())
		p.Release()
	}
}

// The memory is bounded whatever the number of candidate sets seen, and a set
// that keeps its slot rotates evenly afterwards.
func TestFix5RoundRobinBounded(t *testing.T) {
	h := newHarness(t, testConfig())
	rr := &RoundRobin{}
	for i := range 4 * rrSlots {
		p := h.pickOf(nil, dep(fmt.Sprint("x", i), "m"), dep(fmt.Sprint("y", i), "m"))
		rr.Select(p)
	}
	if n := rr.tracked(); n > rrSlots {
		t.Fatalf("%d candidate sets tracked, want at most %d", n, rrSlots)
	}
	p := h.pickOf(nil, dep("a", "m"), dep("b", "m"), dep("c", "m"))
	if got := shares(rr, p, 300); got["a"] != got["b"] || got["b"] != got["c"] {
		t.Fatalf("shares %v, want even", got)
	}
}
