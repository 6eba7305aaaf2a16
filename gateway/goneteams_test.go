package gateway

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"switchyard/edge"
	"switchyard/internal/teamtest"
	"switchyard/telemetry"
)

// TestGoneTeamsSweep: a team the catalog no longer has loses its metric
// series and its local limiter state once it has been gone at every sweep
// for the grace, not before; a team that comes back within the grace
// starts its wait again; a team in the catalog and the "-" series of
// unauthenticated requests stay. Before, both stores kept a deleted team
// until restart (SPEC 16).
func TestGoneTeamsSweep(t *testing.T) {
	m := telemetry.NewMetrics(prometheus.NewRegistry())
	local := edge.NewLocal(nil, nil)
	for _, name := range []string{"a", "b", "c"} {
		m.Requests.WithLabelValues("m", name, "200").Inc()
		m.Tokens.WithLabelValues(name, "d", "prompt").Add(3)
		if _, err := local.Begin(context.Background(), &edge.Request{RequestID: "r", Team: teamtest.Team(name, teamtest.Limits{RPM: 10})}); err != nil {
			t.Fatal(err)
		}
	}
	m.Requests.WithLabelValues("m", "-", "401").Inc()
	names := func(st teamStore) []string {
		var out []string
		st.TeamNames(func(n string) {
			if !slices.Contains(out, n) {
				out = append(out, n)
			}
		})
		slices.Sort(out)
		return out
	}
	catalog := map[string]bool{"b": true}
	has := func(n string) bool { return catalog[n] }
	stores := []teamStore{m, local}
	var g goneTeams
	t0 := time.Unix(1_800_000_000, 0)
	const grace = time.Minute
	for _, step := range []struct {
		at      time.Duration
		back    bool // c is in the catalog at this sweep
		dropped int
	}{
		{0, false, 0},                 // a and c found gone
		{30 * time.Second, true, 0},   // c back: its wait ends
		{40 * time.Second, false, 0},  // c gone again: its wait starts here
		{60 * time.Second, false, 1},  // a gone a whole grace: dropped
		{90 * time.Second, false, 0},  // c gone 50 s
		{100 * time.Second, false, 1}, // c gone a grace
	} {
		catalog["c"] = step.back
		if d := g.sweep(t0.Add(step.at), has, grace, stores); d != step.dropped {
			t.Fatalf("sweep at %v dropped %d teams, want %d", step.at, d, step.dropped)
		}
		if step.at == 60*time.Second {
			if got := names(m); !slices.Equal(got, []string{"-", "b", "c"}) {
				t.Fatalf("metric series' teams after a was dropped: %q", got)
			}
			if got := names(local); !slices.Equal(got, []string{"b", "c"}) {
				t.Fatalf("local limiter's teams after a was dropped: %q", got)
			}
		}
	}
	if got, want := names(m), []string{"-", "b"}; !slices.Equal(got, want) {
		t.Fatalf("metric series' teams at the end %q, want %q", got, want)
	}
	if got := names(local); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("local limiter's teams at the end %q, want [b]", got)
	}
}
