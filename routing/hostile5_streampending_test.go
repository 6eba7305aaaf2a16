package routing

import (
	"testing"
	"time"
)

// TestHostile5StreamsInFlightDoNotHerd: SPEC 5 `latency` picks the lowest
// latency estimate, "time to first byte for streams", at random within
// latency_buffer of the best "so traffic does not herd". A stream's latency
// sample is its time to first byte, but its attempt is Done only when the
// stream ends: a stream that answered in 0.5 s and is still relaying its
// tokens 15 s later is not a deployment 15 s slow. Before the fix every
// busy deployment counted as at least as slow as the time since it last
// completed anything (the pending-age bound), streams included, so the
// deployment with the most streams (completing one every second) looked
// fastest and took all but a tenth of the traffic (540 of 600 requests, 16
// more streams in flight than its twin).
//
// A sync attempt outstanding longer than the estimate still counts (the
// brownout bound): its completion is its latency sample.
func TestHostile5StreamsInFlightDoNotHerd(t *testing.T) {
	h := newHarness(t, testConfig())
	s := snap(map[string]string{"m": "latency"}, dep("a", "m"), dep("b", "m"))
	stream := func(in *PlanInput) { in.Profile.Stream = true }
	type open struct {
		a   *Attempt
		end time.Time
	}
	var live []open
	count := map[string]int{}
	worst := int64(0)
	const n = 600
	for range n {
		now := h.clock.Now()
		keep := live[:0]
		for _, o := range live {
			if o.end.After(now) {
				keep = append(keep, o)
				continue
			}
			o.a.Done(Outcome{Status: 200, Class: ClassOK, TTFB: 500 * time.Millisecond, Latency: 20 * time.Second})
		}
		live = keep
		a, ok := h.plan(s, "m", stream).Next()
		if !ok {
			t.Fatal("no attempt")
		}
		count[a.Deployment.ID]++
		live = append(live, open{a, now.Add(20 * time.Second)})
		d := h.r.State("a").InFlight() - h.r.State("b").InFlight()
		worst = max(worst, d, -d)
		h.clock.Advance(time.Second)
	}
	for _, id := range []string{"a", "b"} {
		if share := float64(count[id]) / n; share < 0.35 {
			t.Errorf("identical deployments, streams of 0.5 s to first byte: %s got %.0f%% of the requests (%v), the other herded them; in-flight apart by up to %d",
				id, 100*share, count, worst)
		}
	}

	// the brownout bound still holds for a sync attempt: outstanding for
	// 10 s on a deployment estimated at 0.5 s, it counts as at least 10 s
	h2 := newHarness(t, testConfig())
	s2 := snap(map[string]string{"m": "latency"}, dep("a", "m"), dep("b", "m"))
	h2.setLatency("a", 500*time.Millisecond)
	h2.setLatency("b", 500*time.Millisecond)
	var held *Attempt
	for held == nil || held.Deployment.ID != "a" {
		if held != nil {
			held.Done(ok())
		}
		held, _ = h2.plan(s2, "m").Next()
	}
	h2.clock.Advance(10 * time.Second)
	p := h2.pickOf(s2.Models["m"], s2.Deployments["a"], s2.Deployments["b"])
	p.tick = h2.r.tick(h2.clock.Now())
	lat := make([]float64, 2)
	p.Latencies(lat)
	if lat[0] < 10 {
		t.Errorf("a sync attempt outstanding for 10 s: a's latency %.2fs, want at least 10s", lat[0])
	}
	held.Done(ok())
}
