package node

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"switchyard/config"
	"switchyard/edge"
	"switchyard/internal/redistest"
)

// herdUpstream is an OpenAI-compatible upstream that counts its calls per
// prompt and records when each arrived. A prompt starting "fail" or "cut"
// holds its first call until the test releases it (fail then answers 500;
// cut answers only when its caller is gone); a prompt starting "slow"
// answers after a second, every other call after delay.
type herdUpstream struct {
	delay   time.Duration
	release chan struct{}

	mu    sync.Mutex
	calls map[string][]time.Time
	first chan string // the prompt of each held first call, as it arrives
}

func newHerdUpstream(t *testing.T, delay time.Duration) (*herdUpstream, *httptest.Server) {
	u := &herdUpstream{delay: delay, release: make(chan struct{}), calls: map[string][]time.Time{}, first: make(chan string, 4)}
	srv := httptest.NewServer(u)
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(u.release) })
	return u, srv
}

func (u *herdUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	prompt := string(b)
	if i := strings.Index(prompt, `"content":"`); i >= 0 {
		prompt = prompt[i+len(`"content":"`):]
		prompt = prompt[:strings.IndexByte(prompt, '"')]
	}
	u.mu.Lock()
	u.calls[prompt] = append(u.calls[prompt], time.Now())
	n := len(u.calls[prompt])
	u.mu.Unlock()
	held := n == 1 && (strings.HasPrefix(prompt, "fail") || strings.HasPrefix(prompt, "cut"))
	if held {
		u.first <- prompt
		select {
		case <-u.release:
		case <-r.Context().Done():
			return // the leader was cut off
		}
		if strings.HasPrefix(prompt, "fail") {
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprint(w, `{"error":{"message":"upstream broke","type":"server_error"}}`)
			return
		}
		<-r.Context().Done() // cut: answers nobody
		return
	}
	delay := u.delay
	if strings.HasPrefix(prompt, "slow") {
		delay = time.Second
	}
	select {
	case <-time.After(delay):
	case <-r.Context().Done():
		return
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"id":"x","object":"chat.completion","created":1,"model":"up","choices":[{"index":0,"message":{"role":"assistant","content":"answer to %s"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":3,"total_tokens":8}}`, prompt)
}

// arrivals are the times the calls for prompt arrived.
func (u *herdUpstream) arrivals(prompt string) []time.Time {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]time.Time(nil), u.calls[prompt]...)
}

type herdAnswer struct {
	node   int
	status int
	cache  string
	tier   string // X-Switchyard-Tier
	body   string
	took   time.Duration
}

// ask posts prompt to node i's server as key, bounded by ctx.
func ask(ctx context.Context, srvs []*httptest.Server, i int, key, prompt string) herdAnswer {
	return askModel(ctx, srvs, i, key, "herd", prompt)
}

// askModel is ask for another model or tier alias, with headers (name,
// value pairs).
func askModel(ctx context.Context, srvs []*httptest.Server, i int, key, model, prompt string, hdr ...string) herdAnswer {
	body := `{"model":"` + model + `","messages":[{"role":"user","content":"` + prompt + `"}]}`
	req, _ := http.NewRequestWithContext(ctx, "POST", srvs[i].URL+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	for j := 0; j+1 < len(hdr); j += 2 {
		req.Header.Set(hdr[j], hdr[j+1])
	}
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return herdAnswer{node: i, took: time.Since(start)}
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return herdAnswer{node: i, status: resp.StatusCode, cache: resp.Header.Get("X-Switchyard-Cache"), tier: resp.Header.Get("X-Switchyard-Tier") + "/" + resp.Header.Get("X-Switchyard-Tier-Source"), body: string(b), took: time.Since(start)}
}

// waitFollowing waits (at most 5 s) until node n has want requests
// waiting for another node's answer.
func waitFollowing(t *testing.T, n *Node, want int) {
	t.Helper()
	r := n.Edge.(*edge.Redis)
	for deadline := time.Now().Add(5 * time.Second); r.Following() != want; time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d requests wait for another node's answer, want %d", r.Following(), want)
		}
	}
}

// SPEC 18, cross-node coalescing on a real redis-server with three
// gateways: a herd of 20 identical requests spread over the nodes against
// a slow upstream makes one upstream call and all succeed, for a team
// without limits (readLua), one with RPM (gcraLua) and one with a budget
// (beginLua); a leader whose upstream fails, and one cut off by its client,
// release the followers on the other nodes at once (well before
// coalesce_wait), and each then calls the upstream itself and succeeds.
func TestClusterCoalescing(t *testing.T) {
	up, upSrv := newHerdUpstream(t, 300*time.Millisecond)
	const wait = 8 * time.Second // cache.coalesce_wait: the releases below must come well before it
	rs, nodes, srvs := startCluster(t, 3, "500ms",
		"providers:\n", "providers:\n  - {name: up, kind: openai, base_url: \""+upSrv.URL+"/v1\", api_key: k}\n",
		"deployments:\n", "deployments:\n  - {id: u1, model: herd, provider: up}\n  - {id: u2, model: herdhard, provider: up}\n",
		"smart_routing:", "cache: {enabled: true, coalesce_wait: 8s}\nrouting: {max_attempts: {chat: {sync: 1, stream: 1}}}\nsmart_routing:",
		"{alias: normal, easy: m, hard: strong}", "{alias: normal, easy: m, hard: strong}, {alias: herdtier, easy: herd, hard: herdhard}")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	for _, key := range []string{"sk-open", "sk-rpm", "sk-budget"} {
		t.Run("herd "+key, func(t *testing.T) {
			prompt := "herd " + key
			out := make(chan herdAnswer, 20)
			var start sync.WaitGroup
			start.Add(1)
			for i := range 20 {
				go func() {
					start.Wait()
					out <- ask(ctx, srvs, i%3, key, prompt)
				}()
			}
			start.Done()
			got := map[string]int{}
			leader := -1
			byNode := [3]int{}
			for range 20 {
				a := <-out
				if a.status != 200 || !strings.Contains(a.body, "answer to "+prompt) {
					t.Errorf("node %d: %d %q %s", a.node+1, a.status, a.cache, a.body)
				}
				got[a.cache]++
				if a.cache == "miss" {
					leader = a.node
				} else {
					byNode[a.node]++
				}
			}
			if n := len(up.arrivals(prompt)); n != 1 || got["miss"] != 1 || got["coalesced"]+got["hit"] != 19 {
				t.Fatalf("20 identical requests over 3 nodes made %d upstream calls; cache headers %v", n, got)
			}
			for i := range 3 {
				if i != leader && byNode[i] == 0 {
					t.Fatalf("node %d answered nothing from the leader's call (%v)", i+1, byNode)
				}
			}
		})
	}

	// a tier alias leases the entry of the tier it goes to as far as that
	// is known before Begin: the classifier's (easy here) or a forced one
	for _, tc := range []struct{ name, prompt, tier, hdr string }{
		{"alias classified easy", "alias herd easy", "easy", ""},
		{"alias forced hard", "alias herd hard", "hard", "hard"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var hdr []string
			if tc.hdr != "" {
				hdr = []string{"X-Switchyard-Tier", tc.hdr}
			}
			out := make(chan herdAnswer, 20)
			for i := range 20 {
				go func() { out <- askModel(ctx, srvs, i%3, "sk-budget", "herdtier", tc.prompt, hdr...) }()
			}
			got := map[string]int{}
			for range 20 {
				a := <-out
				if a.status != 200 || !strings.Contains(a.body, "answer to "+tc.prompt) {
					t.Errorf("node %d: %d %q %s", a.node+1, a.status, a.cache, a.body)
				}
				got[a.cache]++
			}
			if n := len(up.arrivals(tc.prompt)); n != 1 || got["coalesced"]+got["hit"] != 19 {
				t.Fatalf("20 identical requests for a tier alias (%s) over 3 nodes made %d upstream calls; cache headers %v", tc.tier, n, got)
			}
		})
	}
	// a session pinned hard: its requests classified easy lease the easy
	// entry in Begin, then the pin moves them to hard; each drops that
	// lease at once and coalesces on its node alone, so none waits for a
	// leader of the other tier
	t.Run("alias moved by its session's pin", func(t *testing.T) {
		pins := func() int {
			keys, _ := rs.Client().Keys(ctx, "sytest:{team:budget}:pt:*").Result()
			return len(keys)
		}
		before := pins() // the herds above pinned their own (fingerprint) sessions
		hard := `{"model":"herdtier","reasoning_effort":"high","messages":[{"role":"user","content":"pin it"}]}`
		req, _ := http.NewRequestWithContext(ctx, "POST", srvs[0].URL+"/v1/chat/completions", strings.NewReader(hard))
		req.Header.Set("Authorization", "Bearer sk-budget")
		req.Header.Set("X-Session-Id", "conv-hard")
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.Header.Get("X-Switchyard-Tier") != "hard" {
			t.Fatalf("the escalating request: %v %v", err, resp)
		}
		resp.Body.Close()
		for deadline := time.Now().Add(5 * time.Second); pins() == before; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the session's hard pin never reached Redis")
			}
		}
		const prompt = "slow alias herd pinned" // a second at the upstream
		out := make(chan herdAnswer, 9)
		for i := range 9 {
			go func() { out <- askModel(ctx, srvs, i%3, "sk-budget", "herdtier", prompt, "X-Session-Id", "conv-hard") }()
		}
		for range 9 {
			a := <-out
			if a.status != 200 || !strings.Contains(a.body, "answer to "+prompt) {
				t.Errorf("node %d: %d %q %s", a.node+1, a.status, a.cache, a.body)
			}
			if a.took > 1800*time.Millisecond {
				t.Errorf("node %d: took %v: it waited for a leader of the tier it did not go to", a.node+1, a.took)
			}
			if a.tier != "hard/pinned" {
				t.Errorf("node %d: tier %s, want the session's pin", a.node+1, a.tier)
			}
		}
		if n := len(up.arrivals(prompt)); n < 1 || n > 3 {
			t.Fatalf("%d upstream calls, want one per node at most (each coalesces on its node)", n)
		}
		for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			var leases []string // a lease lives in its entry's key until the entry replaces it
			keys, _ := rs.Client().Keys(ctx, "sytest:{team:budget}:rc:*").Result()
			for _, k := range keys {
				if v, _ := rs.Client().Get(ctx, k).Result(); edge.IsLease(v) {
					leases = append(leases, k)
				}
			}
			if len(leases) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("leases left behind: %v", leases)
			}
		}
	})

	var coalesced float64
	for _, n := range nodes {
		coalesced += counterValue(t, n, "switchyard_cache_requests_total", `result="coalesced"`)
	}
	if coalesced == 0 {
		t.Fatal("switchyard_cache_requests_total{result=\"coalesced\"} counts no follower")
	}

	// a leader that fails, and one cut off by its client: the followers on
	// the two other nodes are released at once and call the upstream
	// themselves
	for _, prompt := range []string{"fail once", "cut off"} {
		t.Run(prompt, func(t *testing.T) {
			lctx, lcancel := context.WithCancel(ctx)
			defer lcancel()
			lead := make(chan herdAnswer, 1)
			go func() { lead <- ask(lctx, srvs, 0, "sk-rpm", prompt) }()
			select {
			case <-up.first: // the leader is at the upstream, holding the lease
			case <-ctx.Done():
				t.Fatal("the leader never reached the upstream")
			}
			out := make(chan herdAnswer, 2)
			for _, i := range []int{1, 2} {
				go func() { out <- ask(ctx, srvs, i, "sk-rpm", prompt) }()
			}
			waitFollowing(t, nodes[1], 1)
			waitFollowing(t, nodes[2], 1)
			cut := time.Now()
			if prompt == "cut off" {
				lcancel() // the leader's client goes away mid-call
			} else {
				up.release <- struct{}{} // its upstream answers 500
			}
			if a := <-lead; a.status == 200 {
				t.Fatalf("the leader succeeded: %+v", a)
			}
			for range 2 {
				a := <-out
				if a.status != 200 || a.cache != "miss" || !strings.Contains(a.body, "answer to "+prompt) {
					t.Fatalf("released follower on node %d: %d %q %s", a.node+1, a.status, a.cache, a.body)
				}
			}
			calls := up.arrivals(prompt)
			if len(calls) != 3 {
				t.Fatalf("%d upstream calls, want the leader's and one per released follower", len(calls))
			}
			for _, at := range calls[1:] {
				if at.Before(cut) {
					t.Fatal("a follower called the upstream while its leader was still running")
				}
				if d := at.Sub(cut); d > wait/4 {
					t.Fatalf("a follower was released %v after its leader ended (coalesce_wait %v): not at once", d, wait)
				}
			}
		})
	}
}

// counterValue sums the samples of a counter on n's /metrics whose labels
// contain match.
func counterValue(t *testing.T, n *Node, name, match string) float64 {
	t.Helper()
	w := do(t, n.Handler(), "GET", "/metrics", "", "")
	var sum float64
	for _, line := range strings.Split(w.Body.String(), "\n") {
		if strings.HasPrefix(line, name+"{") && strings.Contains(line, match) {
			var v float64
			if _, err := fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v); err == nil {
				sum += v
			}
		}
	}
	return sum
}

// Cross-node coalescing on Redis Cluster (SPEC 18): the lease sits beside
// its entry on the team's shard, the leader's notice is published from the
// finish script on that shard and reaches the subscription each gateway
// holds on whichever node serves it. A herd over three gateways makes one
// upstream call per team.
func TestRedisClusterCoalescing(t *testing.T) {
	rc := redistest.StartCluster(t, 3) // about 11 s of the test: creating the Cluster; the herds take one
	up, upSrv := newHerdUpstream(t, 300*time.Millisecond)
	yml := fmt.Sprintf(`
server: {node_id: "%%s"}
redis: {addrs: [%s], timeout: 1s, key_prefix: "sycc:"}
cache: {enabled: true, coalesce_wait: 8s}
providers:
  - {name: up, kind: openai, base_url: "%s/v1", api_key: k}
deployments:
  - {id: u1, model: herd, provider: up}
teams:
  - {name: a, keys: [sk-a], models: ['*']}
  - {name: b, keys: [sk-b], models: ['*'], rpm: 100000}
`, strings.Join(rc.Addrs(), ", "), upSrv.URL)
	var srvs []*httptest.Server
	for i := range 3 {
		cfg, err := config.Load([]byte(fmt.Sprintf(yml, fmt.Sprintf("c%d", i))), nil)
		if err != nil {
			t.Fatal(err)
		}
		n, err := Assemble(cfg, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Seed: int64(i + 1)})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(n.Handler())
		t.Cleanup(func() {
			srv.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_ = n.Close(ctx)
		})
		srvs = append(srvs, srv)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, key := range []string{"sk-a", "sk-b"} {
		prompt := "cluster herd " + key
		out := make(chan herdAnswer, 12)
		for i := range 12 {
			go func() { out <- ask(ctx, srvs, i%3, key, prompt) }()
		}
		got := map[string]int{}
		for range 12 {
			a := <-out
			if a.status != 200 {
				t.Errorf("node %d: %d %s", a.node+1, a.status, a.body)
			}
			got[a.cache]++
		}
		if n := len(up.arrivals(prompt)); n != 1 || got["coalesced"]+got["hit"] != 11 {
			t.Fatalf("%s: 12 identical requests over 3 gateways on Redis Cluster made %d upstream calls; cache headers %v", key, n, got)
		}
	}
}
