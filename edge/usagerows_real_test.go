package edge

import (
	"context"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"switchyard/cluster"
	"switchyard/internal/redistest"
)

// TestRealUsageRowsAllocation reads 2,500 teams over 30 days (75,000 day
// hashes, three of them written, one of another type) from a real
// redis-server: the rows written come back, the key of another type spoils
// nothing else, and the node allocates under 110 bytes a hash. A read of
// one HGETALL a hash allocated about 250 (its command, arguments, key and
// empty reply): the console's usage page read 10,000 teams' 300,000 hashes
// every 15 s and took a node past its 150 MB (bench/opsmem.sh).
func TestRealUsageRowsAllocation(t *testing.T) {
	srv := redistest.Start(t)
	r, _ := replica(t, srv.URL(), 2*time.Second, 0, 1)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	now := time.Now().UTC()
	today, week := dayOf(now), dayOf(now)-6
	write := func(team string, d int32, model string, req int) {
		t.Helper()
		k := cluster.TeamKey("sy:", team, "usage:"+dayString(d))
		f := rowField(rowKey{day: d, model: model, key: "k1", user: ""})
		if err := c.HSet(ctx, k, f+"req", req, f+"usd", "0.25").Err(); err != nil {
			t.Fatal(err)
		}
	}
	write("t7", today, "m1", 3)
	write("t7", week, "m2", 5)
	write("t2400", today, "m1", 1)
	if err := c.Set(ctx, cluster.TeamKey("sy:", "t7", "usage:"+dayString(today-2)), "not a hash", 0).Err(); err != nil {
		t.Fatal(err)
	}
	teams := make([]string, 2500)
	for i := range teams {
		teams[i] = "t" + strconv.Itoa(i)
	}
	q := UsageQuery{Teams: teams, From: now.AddDate(0, 0, -29), To: now}
	read := func() UsageReport {
		t.Helper()
		rep, err := r.UsageRows(ctx, q)
		if err != nil || !rep.Shared {
			t.Fatalf("report shared %v, %v", rep.Shared, err)
		}
		return rep
	}
	read() // the script loaded, the client's connections made
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	rep := read()
	runtime.ReadMemStats(&m1)

	got := map[string]int64{}
	for _, row := range rep.Rows {
		got[row.Team+" "+row.Day+" "+row.Model] = row.Requests
	}
	want := map[string]int64{"t7 " + dayString(today) + " m1": 3, "t7 " + dayString(week) + " m2": 5, "t2400 " + dayString(today) + " m1": 1}
	if len(got) != len(want) {
		t.Fatalf("rows %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("rows %v, want %v", got, want)
		}
	}
	// the writer's own allocations are in the figure too: at most a few
	// KB over a read (nothing is served)
	per := float64(m1.TotalAlloc-m0.TotalAlloc) / 75000
	t.Logf("%.0f bytes allocated a day hash", per)
	if per > 110 {
		t.Fatalf("a read allocated %.0f bytes a day hash, want under 110", per)
	}
}
