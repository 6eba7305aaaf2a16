package shared

import (
	"context"
	"path"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"switchyard/cache"
	"switchyard/cluster"
	"switchyard/edge"
	"switchyard/internal/redistest"
)

// The MATCH patterns select a scope's entries and nothing else, whatever
// the team and model names hold (SCAN's glob is path.Match's, near enough
// for these characters).
func TestPurgePatterns(t *testing.T) {
	s := &Store{prefix: "p*:"}
	hex := strings.Repeat("a", 64)
	key := func(team, model string) string { return "p*:{team:" + team + "}:rc:" + model + ":" + hex }
	for _, c := range []struct {
		team, model string
		match       []string
		miss        []string
	}{
		{"t", "m", []string{key("t", "m")}, []string{key("t", "m:x"), key("t", "n"), key("u", "m"), "p*:{team:t}:pt:x"}},
		{"t?", "m[1]", []string{key("t?", "m[1]")}, []string{key("tx", "m[1]"), key("t?", "m1")}},
		{"t", "", []string{key("t", "m"), key("t", "m:x")}, []string{key("u", "m"), "p*:{team:t}:pd:x"}},
		{"", "", []string{key("t", "m"), key("u", "n")}, []string{"p*:{team:t}:tat", "px:{team:t}:rc:m:" + hex}},
	} {
		pat := s.pattern(c.team, c.model)
		for _, k := range c.match {
			if ok, err := path.Match(pat, k); !ok || err != nil {
				t.Errorf("%q should match %q (%v)", pat, k, err)
			}
		}
		for _, k := range c.miss {
			if ok, _ := path.Match(pat, k); ok {
				t.Errorf("%q should not match %q", pat, k)
			}
		}
	}
}

// The store against a real redis-server and a real Redis Cluster (three
// masters: a purge of every team scans every master): purges remove their
// scope's entries only and are announced; counts add up.
func TestStoreOnRealRedis(t *testing.T) {
	for _, c := range []struct {
		name   string
		client func(t *testing.T) redis.UniversalClient
	}{
		{"server", func(t *testing.T) redis.UniversalClient { return redistest.Start(t).Client() }},
		{"cluster", func(t *testing.T) redis.UniversalClient {
			return redis.NewClusterClient(&redis.ClusterOptions{Addrs: redistest.StartCluster(t, 3).Addrs()})
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			rc := c.client(t)
			defer rc.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			s := New(rc, Config{Prefix: "p:", Batch: 3})
			hex := strings.Repeat("b", 64)
			put := func(team, model string, n int) {
				for i := range n {
					k := cluster.TeamKey("p:", team, edge.CacheKey(model, hex[:63]+strconv.Itoa(i%10)))
					if err := rc.Set(ctx, k, "e", time.Hour).Err(); err != nil {
						t.Fatal(err)
					}
				}
			}
			for _, team := range []string{"a", "b", "c", "d", "e"} {
				put(team, "m", 4)
				put(team, "n", 2)
			}
			if err := rc.Set(ctx, cluster.TeamKey("p:", "a", "tat"), "x", time.Hour).Err(); err != nil {
				t.Fatal(err)
			}
			// a request's coalescing lease, in the key of the entry it will store
			leaseKey := cluster.TeamKey("p:", "a", edge.CacheKey("m", strings.Repeat("c", 64)))
			if err := rc.Set(ctx, leaseKey, edge.LeaseMark+"node:1", time.Hour).Err(); err != nil {
				t.Fatal(err)
			}
			heard := make(chan string, 10)
			wctx, stop := context.WithCancel(ctx)
			ready := make(chan struct{})
			go s.Watch(wctx, time.Hour, func(team, model string, _ time.Time) { heard <- team + "/" + model }, func() { close(ready) })
			<-ready
			defer stop()
			now := time.Now()
			for _, p := range []struct {
				team, model string
				removed     int
			}{{"a", "m", 4}, {"a", "", 2}, {"", "", 24}} {
				n, err := s.Purge(ctx, p.team, p.model, now, time.Hour)
				if err != nil || n != p.removed {
					t.Fatalf("purge %s/%s: %d %v, want %d", p.team, p.model, n, err, p.removed)
				}
				select {
				case got := <-heard:
					if got != p.team+"/"+p.model {
						t.Fatalf("heard %q for %s/%s", got, p.team, p.model)
					}
				case <-ctx.Done():
					t.Fatal("the purge notice never came")
				}
			}
			if v, err := rc.Get(ctx, cluster.TeamKey("p:", "a", "tat")).Result(); err != nil || v != "x" {
				t.Fatalf("a purge removed a key that is no entry: %q %v", v, err)
			}
			if v, err := rc.Get(ctx, leaseKey).Result(); err != nil || v != edge.LeaseMark+"node:1" {
				t.Fatalf("a purge removed (and counted) a coalescing lease: %q %v", v, err)
			}
			got := map[string]time.Time{}
			if err := s.Purges(ctx, func(team, model string, at time.Time) { got[team+"/"+model] = at }); err != nil || len(got) != 3 ||
				!got["a/m"].Equal(now.Truncate(time.Millisecond)) {
				t.Fatalf("purges on record: %v %v", got, err)
			}
			for range 2 {
				if err := s.Add(ctx, []cache.Stat{{Team: "a", Model: "m", Hits: 2, Misses: 1, SavedTokens: 10, SavedUSD: 0.25, Entries: 1, Bytes: 100}}); err != nil {
					t.Fatal(err)
				}
			}
			st, err := s.Stats(ctx)
			if err != nil || len(st) != 1 || st[0] != (cache.Stat{Team: "a", Model: "m", Hits: 4, Misses: 2, SavedTokens: 20, SavedUSD: 0.5, Entries: 2, Bytes: 200}) {
				t.Fatalf("stats %+v %v", st, err)
			}
		})
	}
}
