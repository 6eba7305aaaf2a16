package telemetry

import (
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"switchyard/internal/heaptest"
)

// TestCounterTableBytesPerTeam bounds the heap the per-team tables keep for
// the SPEC 16 figure's teams: 10,000 teams that each count requests of one
// model and status and tokens in both directions on two deployments.
func TestCounterTableBytesPerTeam(t *testing.T) {
	const n = 10000
	teams := make([]string, n)
	for i := range teams {
		teams[i] = fmt.Sprintf("t%d", i)
	}
	objects, bytes := heaptest.Retained(func() any { return teamTables(teams) })
	per := bytes / n
	objs := float64(objects) / n
	t.Logf("%d B and %.2f objects per team for 5 series", per, objs)
	if per > tableBytesPerTeam {
		t.Fatalf("%d B per team of 5 series, want <= %d", per, tableBytesPerTeam)
	}
	// a row a table, its series in it: two objects a team, and the maps'
	// share (the collector marks each)
	if objs > 2.5 {
		t.Fatalf("%.2f heap objects per team of 5 series, want <= 2.5", objs)
	}
}

// tableBytesPerTeam bounds the two tables' bytes per team: a map entry of
// three labels and a counter per series kept 584 B, a row per team with a
// short list of counters 323 B, a row with its series in slots 291 B.
const tableBytesPerTeam = 360

// teamTables are the requests and tokens tables of teams, each counting
// requests of one model and status and tokens in both directions on two
// deployments.
func teamTables(teams []string) [2]*CounterTable {
	requests := NewCounterTable(prometheus.CounterOpts{Name: "r_total", Help: "r"}, "model", "team", "status")
	tokens := NewCounterTable(prometheus.CounterOpts{Name: "t_total", Help: "t"}, "team", "deployment", "direction")
	for _, tm := range teams {
		requests.WithLabelValues("m", tm, "200").Inc()
		for _, d := range []string{"d1", "d2"} {
			tokens.WithLabelValues(tm, d, "prompt").Add(3)
			tokens.WithLabelValues(tm, d, "completion").Add(5)
		}
	}
	return [2]*CounterTable{requests, tokens}
}

// BenchmarkMarkTeamTables is a full collection of a heap that holds the
// tables of 10,000 teams: what the tables add to every GC cycle of a
// 10,000-team node (compare BenchmarkMarkNothing, the same collection
// without them).
func BenchmarkMarkTeamTables(b *testing.B) {
	teams := make([]string, 10000)
	for i := range teams {
		teams[i] = fmt.Sprintf("t%d", i)
	}
	kept := teamTables(teams)
	heaptest.Collect(b, kept)
}

// BenchmarkMarkNothing is BenchmarkMarkTeamTables' collection without the
// tables.
func BenchmarkMarkNothing(b *testing.B) {
	heaptest.Collect(b, nil)
}
