package node

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"switchyard/edge"
)

// SPEC 18 across replicas: an answer one node stored (through its writer)
// is a hit on another, read in that node's Begin round trip; a limited team
// and an unlimited one alike; a tier alias reads the entry of the tier it
// resolved to.
func TestCacheSharedAcrossReplicas(t *testing.T) {
	_, nodes, srvs := startCluster(t, 2, "500ms", "redis: {", "cache: {enabled: true}\nredis: {")
	for _, key := range []string{"sk-rpm", "sk-open"} {
		body := `{"model":"m","messages":[{"role":"user","content":"shared ` + key + `"}]}`
		resp, _ := post(t, srvs[0].URL+"/v1/chat/completions", key, body)
		if resp == nil || resp.StatusCode != 200 || resp.Header.Get("X-Switchyard-Cache") != "miss" {
			t.Fatalf("%s first on node 1: %v", key, resp)
		}
		// node 1's writer sends the entry; then node 2 answers from it
		deadline := time.Now().Add(5 * time.Second)
		for {
			resp, b := post(t, srvs[1].URL+"/v1/chat/completions", key, body, "Cache-Control", "only-if-cached")
			if resp != nil && resp.StatusCode == 200 && resp.Header.Get("X-Switchyard-Cache") == "hit" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: node 2 never found node 1's entry: %v %s", key, resp, b)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	for _, n := range nodes {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = n.Close(ctx)
		cancel()
	}
}

// SPEC 18's administration across replicas, over real HTTP: the stats sum
// every node's counts ("shared": true); a purge taken by one node removes
// the shared entries of its scope (a team's model, a team, everything) and
// no node answers from a purged entry afterwards, neither from Redis (a
// copy a late writer puts back is refused by its stored time) nor from its
// own store (the notice drops it).
func TestCachePurgeAndStatsAcrossReplicas(t *testing.T) {
	_, nodes, srvs := startCluster(t, 2, "500ms", "redis: {", "cache: {enabled: true}\nredis: {")
	rc := nodes[0].Redis
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	body := func(model, text string) string {
		return `{"model":"` + model + `","messages":[{"role":"user","content":"` + text + `"}]}`
	}
	type req struct{ key, model, text string }
	one, two, three := req{"sk-open", "m", "one"}, req{"sk-open", "strong", "two"}, req{"sk-rpm", "m", "three"}
	ask := func(node int, r req) string {
		t.Helper()
		resp, _ := post(t, srvs[node].URL+"/v1/chat/completions", r.key, body(r.model, r.text), "Cache-Control", "only-if-cached")
		if resp == nil {
			return ""
		}
		return resp.Header.Get("X-Switchyard-Cache") + " " + resp.Status[:3]
	}
	entries := func(pattern string) []string {
		t.Helper()
		keys, err := rc.Keys(ctx, "sytest:"+pattern).Result()
		if err != nil {
			t.Fatal(err)
		}
		return keys
	}
	// three misses on node 1, stored through its writer; the assertions
	// start once all three are in Redis
	for _, r := range []req{one, two, three} {
		if resp, b := post(t, srvs[0].URL+"/v1/chat/completions", r.key, body(r.model, r.text)); resp == nil || resp.Header.Get("X-Switchyard-Cache") != "miss" {
			t.Fatalf("%v: %v %s", r, resp, b)
		}
	}
	stored := func() (n int) { // keys that hold an entry, not the lease a request holds in it
		for _, k := range entries("{team:*}:rc:*") {
			if v, _ := rc.Get(ctx, k).Result(); v != "" && !edge.IsLease(v) {
				n++
			}
		}
		return n
	}
	for deadline := time.Now().Add(5 * time.Second); stored() < 3; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the entries never reached Redis: %v", entries("*"))
		}
	}
	if k := entries("{team:open}:rc:m:*"); len(k) != 1 {
		t.Fatalf("an entry's name carries its model: %v", k)
	}
	for _, r := range []req{one, two, three} {
		if got := ask(1, r); got != "hit 200" {
			t.Fatalf("%v on node 2: %s", r, got)
		}
	}
	if got := ask(0, one); got != "hit 200" {
		t.Fatalf("one on node 1: %s", got)
	}

	// the stats: node 2's counts reach Redis when it answers them, node 1
	// adds its own and sums every node's
	type statsView struct {
		Shared                bool
		Scope                 string
		Hits, Misses, Entries int64
		SavedTokens           int64   `json:"saved_tokens"`
		SavedUSD              float64 `json:"saved_usd"`
		Teams, Models         []map[string]any
		Local                 struct{ Entries int64 }
	}
	var st statsView
	stats := func(node int) {
		t.Helper()
		st = statsView{}
		code, b := adminReq(t, "GET", srvs[node].URL+"/admin/cache/stats", "")
		if code != 200 || json.Unmarshal([]byte(b), &st) != nil {
			t.Fatalf("stats: %d %s", code, b)
		}
	}
	stats(1)
	stats(0)
	if !st.Shared || st.Scope != "cluster" || st.Hits != 4 || st.Misses != 3 || st.Entries != 3 || st.SavedTokens <= 0 || st.SavedUSD <= 0 || len(st.Teams) != 2 || len(st.Models) != 2 {
		t.Fatalf("cluster stats: %+v", st)
	}
	for _, tm := range st.Teams {
		if want := map[string]float64{"open": 3, "rpm60": 1}[tm["team"].(string)]; tm["hits"].(float64) != want {
			t.Fatalf("team stats: %v", st.Teams)
		}
	}

	// a team's model: one shared entry removed; the others stay
	oneKey := entries("{team:open}:rc:m:*")[0]
	saved, err := rc.Get(ctx, oneKey).Result()
	if err != nil {
		t.Fatal(err)
	}
	if code, b := adminReq(t, "DELETE", srvs[1].URL+"/admin/cache?team=open&model=m", ""); code != 200 || !strings.Contains(b, `"removed":1`) {
		t.Fatalf("purge open/m: %d %s", code, b)
	}
	if len(entries("{team:*}:rc:*")) != 2 {
		t.Fatalf("after purging open/m: %v", entries("{team:*}:rc:*"))
	}
	// node 1 held its own copy of the entry (it stored it): the notice drops it
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if stats(0); st.Local.Entries == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node 1 never dropped its copy: %+v", st)
		}
	}
	// a writer that sends the entry after the scan: every node refuses it
	if err := rc.Set(ctx, oneKey, saved, time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	for node := range 2 {
		if got := ask(node, one); got != "miss 504" {
			t.Fatalf("purged entry on node %d: %s", node+1, got)
		}
		if got := ask(node, two); got != "hit 200" {
			t.Fatalf("open/strong on node %d after purging open/m: %s", node+1, got)
		}
		if got := ask(node, three); got != "hit 200" {
			t.Fatalf("rpm60/m on node %d after purging open/m: %s", node+1, got)
		}
	}
	// a team, then everything
	if code, b := adminReq(t, "DELETE", srvs[0].URL+"/admin/cache?team=open", ""); code != 200 || !strings.Contains(b, `"removed":2`) {
		t.Fatalf("purge open: %d %s", code, b) // strong's entry and the one put back
	}
	if code, b := adminReq(t, "DELETE", srvs[1].URL+"/admin/cache", ""); code != 200 || !strings.Contains(b, `"removed":1`) {
		t.Fatalf("purge all: %d %s", code, b)
	}
	if k := entries("{team:*}:rc:*"); len(k) != 0 {
		t.Fatalf("left after purging everything: %v", k)
	}
	for node := range 2 {
		for _, r := range []req{two, three} {
			if got := ask(node, r); got != "miss 504" {
				t.Fatalf("%v on node %d after purging everything: %s", r, node+1, got)
			}
		}
	}
	stats(0)
	if stats(1); !st.Shared || st.Entries != 0 || st.Hits != 8 || st.Misses != 9 {
		t.Fatalf("stats after the purges: %+v", st)
	}
}

// SPEC 18, Redis killed after storing: the node that stored an answer
// serves it from its own copy while Redis is gone (a hit, no upstream
// call), and so does a node that served it from Redis before (it kept a
// copy), each request within redis.timeout plus scheduling slack; an
// answer a node never held is a 504 cache_miss with only-if-cached and
// otherwise the upstream's. Real redis-server, killed with SIGKILL.
func TestCacheServedThroughRedisOutage(t *testing.T) {
	rs, nodes, srvs := startCluster(t, 2, "200ms", "redis: {", "cache: {enabled: true}\nredis: {")
	body := `{"model":"m","messages":[{"role":"user","content":"kept through an outage"}]}`
	resp, _ := post(t, srvs[0].URL+"/v1/chat/completions", "sk-open", body)
	if resp == nil || resp.StatusCode != 200 || resp.Header.Get("X-Switchyard-Cache") != "miss" {
		t.Fatalf("first request on node 1: %v", resp)
	}
	// stored in Redis once node 2 answers it from there
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, _ := post(t, srvs[1].URL+"/v1/chat/completions", "sk-open", body, "Cache-Control", "only-if-cached")
		if resp != nil && resp.StatusCode == 200 && resp.Header.Get("X-Switchyard-Cache") == "hit" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node 2 never found node 1's entry: %v", resp)
		}
		time.Sleep(20 * time.Millisecond)
	}
	rs.Kill()
	const bound = 200*time.Millisecond + 800*time.Millisecond // redis.timeout, and slack for two shared cores
	timed := func(node int, hdr ...string) (*http.Response, string, time.Duration) {
		return timed2(t, srvs[node].URL, body, hdr...)
	}
	for i := range 3 { // the first pays the timeout that opens the breaker, the others nothing
		resp, b, took := timed(0, "Cache-Control", "only-if-cached")
		if resp == nil || resp.StatusCode != 200 || resp.Header.Get("X-Switchyard-Cache") != "hit" || resp.Header.Get("X-Switchyard-Attempts") != "0" {
			t.Fatalf("node 1, request %d with Redis gone: %v %s, want a hit from the node's copy", i, resp, b)
		}
		if took > bound {
			t.Fatalf("node 1, request %d with Redis gone took %v (bound %v)", i, took, bound)
		}
	}
	resp, b, took := timed(1, "Cache-Control", "only-if-cached")
	if resp == nil || resp.StatusCode != 200 || resp.Header.Get("X-Switchyard-Cache") != "hit" || took > bound {
		t.Fatalf("node 2 (served the entry from Redis before), only-if-cached with Redis gone: %v %s after %v, want a hit from its copy within %v", resp, b, took, bound)
	}
	other := strings.Replace(body, "kept through", "never seen before", 1)
	resp, b, took = timed2(t, srvs[1].URL, other, "Cache-Control", "only-if-cached")
	if resp == nil || resp.StatusCode != 504 || !strings.Contains(b, "cache_miss") || took > bound {
		t.Fatalf("node 2, an answer it never held, only-if-cached with Redis gone: %v %s after %v, want 504 cache_miss within %v", resp, b, took, bound)
	}
	resp, _, took = timed2(t, srvs[1].URL, other)
	if resp == nil || resp.StatusCode != 200 || resp.Header.Get("X-Switchyard-Cache") != "miss" || took > bound {
		t.Fatalf("node 2 with Redis gone: %v after %v, want the upstream's answer (a miss) within %v", resp, took, bound)
	}
	if st := nodes[0].RedisState(); st == "up" {
		t.Fatalf("node 1's Redis state with Redis gone: %q", st)
	}
}

// timed2 posts body to a node as team open and says how long it took.
func timed2(t *testing.T, url, body string, hdr ...string) (*http.Response, string, time.Duration) {
	start := time.Now()
	resp, b := post(t, url+"/v1/chat/completions", "sk-open", body, hdr...)
	return resp, b, time.Since(start)
}
