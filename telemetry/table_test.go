package telemetry

import (
	"fmt"
	"hash/maphash"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestCounterTableExposition: a table exports exactly what the
// prometheus.CounterVec it replaces exported, concurrent adds included.
func TestCounterTableExposition(t *testing.T) {
	opts := prometheus.CounterOpts{Namespace: "switchyard", Name: "tokens_total", Help: "Tokens."}
	table := NewCounterTable(opts, "team", "deployment", "direction")
	vec := prometheus.NewCounterVec(opts, []string{"team", "deployment", "direction"})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 1000 {
				team, dir := fmt.Sprintf("t%d", i%7), []string{"prompt", "completion"}[(i+g)%2]
				table.WithLabelValues(team, "d1", dir).Add(1.5)
				vec.WithLabelValues(team, "d1", dir).Add(1.5)
			}
		}()
	}
	wg.Wait()
	var a, b strings.Builder
	for _, c := range []struct {
		col prometheus.Collector
		out *strings.Builder
	}{{table, &a}, {vec, &b}} {
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(c.col)
		mfs, err := reg.Gather()
		if err != nil || len(mfs) != 1 || len(mfs[0].Metric) != 14 {
			t.Fatalf("gathered %v, err %v; want one family of 14 series", mfs, err)
		}
		fmt.Fprint(c.out, mfs)
	}
	created := regexp.MustCompile(`created_timestamp:\{[^}]*\}`) // the instants differ, not their presence
	if x, y := created.ReplaceAllString(a.String(), "ct"), created.ReplaceAllString(b.String(), "ct"); x != y {
		t.Fatalf("table exports\n%s\nCounterVec exports\n%s", x, y)
	}
	if v := table.WithLabelValues("t0", "d1", "prompt").Value(); v <= 0 {
		t.Fatalf("value %v", v)
	}
}

// TestCounterTableObjectsPerSeries: a series costs about one allocation (its
// counter; the map grows in large steps), where a CounterVec took about ten
// live objects per series. With 10,000 teams the GC marks this per cycle.
func TestCounterTableObjectsPerSeries(t *testing.T) {
	table := NewCounterTable(prometheus.CounterOpts{Name: "x_total", Help: "x"}, "team", "deployment")
	teams := make([]string, 10_000)
	for i := range teams {
		teams[i] = fmt.Sprintf("team-%d", i)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for _, tm := range teams {
		table.WithLabelValues(tm, "d").Inc()
	}
	runtime.ReadMemStats(&after)
	if per := float64(after.Mallocs-before.Mallocs) / float64(len(teams)); per > 2 {
		t.Fatalf("%.1f allocations per series; want at most 2", per)
	}
}

// TestCounterTableForget: Values lists a label's values, and Forget drops
// exactly the series with the value at that label.
func TestCounterTableForget(t *testing.T) {
	tb := NewCounterTable(prometheus.CounterOpts{Name: "t_total", Help: "h"}, "model", "team", "status")
	tb.WithLabelValues("m", "a", "200").Inc()
	tb.WithLabelValues("n", "a", "500").Inc()
	tb.WithLabelValues("a", "b", "200").Inc() // "a" as a model, not a team
	if n := tb.Forget(1, func(v string) bool { return v == "a" }); n != 2 {
		t.Fatalf("Forget dropped %d series, want 2", n)
	}
	var teams []string
	tb.Values(1, func(v string) { teams = append(teams, v) })
	if !slices.Equal(teams, []string{"b"}) {
		t.Fatalf("teams left %q, want [b]", teams)
	}
	if got := tb.WithLabelValues("m", "a", "200").Value(); got != 0 {
		t.Fatalf("a series made again after Forget starts at %v, want 0", got)
	}
}

// TestCounterRow: a row's series are the table's; forgetting by a label
// other than the row's unlinks just those series, and a counter taken
// before still counts, unexported.
func TestCounterRow(t *testing.T) {
	tb := NewCounterTable(prometheus.CounterOpts{Name: "t_total", Help: "h"}, "team", "deployment", "direction")
	row := tb.Row("a")
	old := row.With("d1", "prompt")
	row.With("d2", "prompt").Inc()
	if tb.WithLabelValues("a", "d2", "prompt") != row.With("d2", "prompt") || row.Table() != tb {
		t.Fatal("the row's series is not the table's")
	}
	if n := tb.Forget(1, func(v string) bool { return v == "d1" }); n != 1 {
		t.Fatalf("Forget dropped %d series, want 1", n)
	}
	old.Inc()
	var deps []string
	tb.Values(1, func(v string) { deps = append(deps, v) })
	if !slices.Equal(deps, []string{"d2"}) {
		t.Fatalf("deployments left %q, want [d2]", deps)
	}
	if v := row.With("d1", "prompt").Value(); v != 0 {
		t.Fatalf("d1 made again starts at %v, want 0", v)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(tb)
	if mfs, err := reg.Gather(); err != nil || len(mfs) != 1 || len(mfs[0].Metric) != 2 {
		t.Fatalf("gathered %v, err %v; want d1 (new) and d2", mfs, err)
	}
}

// TestCounterRowConcurrent: series made in a row while it is scraped and
// other series of it are forgotten all count, each once.
func TestCounterRowConcurrent(t *testing.T) {
	tb := NewCounterTable(prometheus.CounterOpts{Name: "t_total", Help: "h"}, "team", "deployment", "direction")
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(tb)
	row := tb.Row("a")
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				row.With(fmt.Sprintf("d%d", i%20), []string{"prompt", "completion"}[g%2]).Inc()
				tb.WithLabelValues("a", "gone", "prompt").Inc()
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 20 {
			if _, err := reg.Gather(); err != nil {
				t.Error(err)
			}
			tb.Forget(1, func(v string) bool { return v == "gone" })
		}
	}()
	wg.Wait()
	tb.Forget(1, func(v string) bool { return v == "gone" })
	for i := range 20 {
		for _, dir := range []string{"prompt", "completion"} {
			if v := tb.WithLabelValues("a", fmt.Sprintf("d%d", i), dir).Value(); v != 20 {
				t.Fatalf("d%d %s counted %v, want 20", i, dir, v)
			}
		}
	}
	if mfs, err := reg.Gather(); err != nil || len(mfs[0].Metric) != 40 {
		t.Fatalf("gathered %d series (err %v), want 40", len(mfs[0].Metric), err)
	}
}

// TestCounterTableRowsOfOneHash: rows whose values hash alike are each
// found, forgotten and made again on their own, wherever they sit in
// their chain, and their places are reused.
func TestCounterTableRowsOfOneHash(t *testing.T) {
	tb := NewCounterTable(prometheus.CounterOpts{Name: "t_total", Help: "h"}, "team", "kind")
	tb.hash = func(_ maphash.Seed, v string) uint64 { return uint64(len(v)) } // "a".."e" collide
	names := []string{"a", "b", "c", "d", "e", "xx"}
	for i, n := range names {
		tb.WithLabelValues(n, "k").Add(float64(i + 1))
	}
	for _, drop := range [][]string{{"c"}, {"a", "e"}, {"b", "d", "xx"}} { // middle, head and tail, the rest
		gone := func(v string) bool { return slices.Contains(drop, v) }
		if n := tb.Forget(0, gone); n != len(drop) {
			t.Fatalf("Forget(%q) dropped %d series, want %d", drop, n, len(drop))
		}
		var left []string
		tb.Values(0, func(v string) { left = append(left, v) })
		for i, n := range names {
			want := float64(i + 1)
			if gone(n) {
				want = 0
			}
			if slices.Contains(left, n) == gone(n) {
				t.Fatalf("after Forget(%q) the rows are %q", drop, left)
			}
			if got := tb.Row(n).With("k").Value(); got != want {
				t.Fatalf("after Forget(%q) row %q counts %v, want %v", drop, n, got, want)
			}
			c := tb.WithLabelValues(n, "k") // made again if forgotten: back to i+1
			c.Add(float64(i+1) - c.Value())
		}
	}
	if len(tb.list) != len(names) {
		t.Fatalf("the table holds %d places for %d rows: forgotten places not reused", len(tb.list), len(names))
	}
}

// TestCounterTableRowsNotReused: a forgotten row that is still held counts
// into itself, never into the row made after it in its place; and 300
// rows, with series past their inline slots (one and two blocks), all
// export.
func TestCounterTableRowsNotReused(t *testing.T) {
	tb := NewCounterTable(prometheus.CounterOpts{Name: "t_total", Help: "h"}, "team", "kind")
	old := tb.Row("a")
	old.With("k").Add(1)
	if n := tb.Forget(0, func(v string) bool { return v == "a" }); n != 1 {
		t.Fatalf("Forget dropped %d series, want 1", n)
	}
	b := tb.Row("b") // takes a's place in the table
	if b == old || b.pos != old.pos {
		t.Fatalf("the new row is the forgotten one (%v) or elsewhere (pos %d, %d)", b == old, b.pos, old.pos)
	}
	old.With("k").Add(5)
	if v := b.With("k").Value(); v != 0 {
		t.Fatalf("the new row counts %v, want 0: it shares the forgotten row's slots", v)
	}
	for i := range 300 {
		row := tb.Row(fmt.Sprintf("t%d", i))
		for k := range i % 15 { // up to 14 series: inline and two blocks
			row.With(fmt.Sprintf("k%d", k)).Add(float64(i))
		}
	}
	var out strings.Builder
	if err := tb.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	want := 1 // b's
	for i := range 300 {
		want += i % 15
	}
	if got := strings.Count(out.String(), "\nt_total{"); got != want {
		t.Fatalf("%d series written, want %d", got, want)
	}
	if !strings.Contains(out.String(), `t_total{kind="k13",team="t299"} 299`) {
		t.Fatalf("t299's 14th series is missing:\n%s", out.String()[:200])
	}
}
