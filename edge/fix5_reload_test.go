package edge

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"switchyard/catalog"
	"switchyard/internal/teamtest"
	"switchyard/ratelimit"
)

// TestBatchDecidesEachAdmissionWithItsOwnLimits: SPEC 3 and 16 (one
// team's concurrent admissions share one script call). A config reload
// between two admissions of one team that join the same batch gives them
// different limits; each is decided with its own. Before, the batch used
// the first admission's limits for the whole team: after an RPM-only
// admission, one whose new limits include max_parallel 1 went through the
// RPM/TPM-only script and was admitted with the team's only slot taken;
// and after an admission with max_parallel, one whose limits have none was
// refused for a slot. The batch still costs one round trip.
func TestBatchDecidesEachAdmissionWithItsOwnLimits(t *testing.T) {
	lean := teamtest.Team("reload", teamtest.Limits{RPM: 100})        // before the reload
	par := teamtest.Team("reload", teamtest.Limits{RPM: 100, Par: 1}) // after it
	for _, order := range []struct {
		name   string
		queued []*catalog.Team
	}{
		{"rpm-only first", []*catalog.Team{lean, par}},
		{"max_parallel first", []*catalog.Team{par, lean}},
	} {
		for _, oneShard := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/one-shard=%v", order.name, oneShard), func(t *testing.T) {
				rig := newMiniRig(t, Config{OneShard: oneShard, Timeout: 5 * time.Second}, false)
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				for _, s := range []*redis.Script{beginScript, gcraScript} { // no NOSCRIPT rerun to count
					if err := s.Load(ctx, rig.c).Err(); err != nil {
						t.Fatal(err)
					}
				}
				gc := &gateClient{Client: rig.c, release: make(chan struct{})}
				rig.r.c = gc
				begin := func(team *catalog.Team, out *Begun, wg *sync.WaitGroup) {
					defer wg.Done()
					b, err := rig.r.Begin(ctx, &Request{RequestID: "r", Team: team, Tokens: 1})
					if err != nil {
						t.Error(err)
					}
					*out = b
				}
				// the leader takes the team's one slot; its call is held
				var wg sync.WaitGroup
				var leader Begun
				wg.Add(1)
				go begin(par, &leader, &wg)
				waitFor(ctx, t, func() bool { return gc.alone.Load() == 1 })
				ts, _ := rig.r.teams.Load("reload")
				cb := &rig.r.comb
				if !oneShard {
					cb = ts.comb
				}
				got := make([]Begun, len(order.queued))
				for i, team := range order.queued {
					wg.Add(1)
					go begin(team, &got[i], &wg)
					waitFor(ctx, t, func() bool { cb.mu.Lock(); defer cb.mu.Unlock(); return len(cb.queue) == i+1 })
				}
				close(gc.release)
				wg.Wait()
				if !leader.Decision.Allowed || leader.Local {
					t.Fatalf("leader: %+v local %v", leader.Decision, leader.Local)
				}
				for i, team := range order.queued {
					b := got[i]
					if b.Local {
						t.Fatalf("admission %d decided locally", i)
					}
					if team.MaxParallel > 0 {
						if b.Decision.Allowed || b.Decision.Kind != ratelimit.KindParallel {
							t.Fatalf("max_parallel 1 with the slot taken: %+v, want refused for parallel", b.Decision)
						}
					} else if !b.Decision.Allowed {
						t.Fatalf("rpm-only admission refused: %+v", b.Decision)
					}
				}
				if rt := gc.alone.Load() + gc.pipes.Load(); rt != 2 {
					t.Fatalf("%d round trips (%d calls alone, %d pipelines), want 2: the leader's and the batch's", rt, gc.alone.Load(), gc.pipes.Load())
				}
				if n := rig.m.Exists("sy:{team:reload}:par"); n {
					if m, _ := rig.m.ZMembers("sy:{team:reload}:par"); len(m) != 1 {
						t.Fatalf("slots in Redis %q, want the leader's only", m)
					}
				}
			})
		}
	}
}

// waitFor waits until cond holds, bounded by ctx.
func waitFor(ctx context.Context, t *testing.T, cond func() bool) {
	t.Helper()
	for !cond() {
		if ctx.Err() != nil {
			t.Fatal("condition not met before the deadline")
		}
		runtime.Gosched()
	}
}
