package node

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"switchyard/config"
	"switchyard/internal/redistest"
)

// clusterYAML is one replica's config; ${REDIS} and ${NODE} are filled in.
const clusterYAML = `
server: {node_id: "${NODE}"}
admin: {key: admin-secret}
redis: {url: "${REDIS}", timeout: ${TIMEOUT}, expected_replicas: 3, key_prefix: "sytest:"}
providers:
  - {name: sim, kind: simulated, simulate: {ttfb: 0s, tokens_per_second: 100000, output_tokens: 4}}
  - {name: slow, kind: simulated, simulate: {ttfb: 1500ms, tokens_per_second: 100000, output_tokens: 4}}
deployments:
  - {id: d1, model: m, provider: sim, price: {input: 1, output: 2}}
  - {id: d2, model: m, provider: sim, price: {input: 1, output: 2}}
  - {id: h1, model: strong, provider: sim}
  - {id: s1, model: slowm, provider: slow}
teams:
  - {name: rpm60, keys: ["sk-rpm"], models: ["*"], rpm: 60}
  - {name: par5, keys: ["sk-par"], models: ["*"], max_parallel: 5}
  - {name: tpm, keys: ["sk-tpm"], models: ["*"], tpm: 2000}
  - {name: open, keys: ["sk-open"], models: ["*"]}
  - {name: budget, keys: ["sk-budget"], models: ["*"], budget: {usd: 1000, period: 720h}}
smart_routing:
  routes: [{alias: normal, easy: m, hard: strong}]
`

// startCluster assembles n replicas sharing one real redis-server.
//
// timeout is redis.timeout: the exactness tests use a generous one because
// 200 client goroutines, three gateways and Redis share two cores, and a
// call that times out falls back to the local limiter (by design) and is no
// longer a test of the shared one. yamlEdits are old, new pairs applied to
// clusterYAML.
func startCluster(t *testing.T, n int, timeout string, yamlEdits ...string) (*redistest.Server, []*Node, []*httptest.Server) {
	t.Helper()
	rs := redistest.Start(t)
	var nodes []*Node
	var srvs []*httptest.Server
	for i := 0; i < n; i++ {
		yml := strings.NewReplacer(append([]string{"${REDIS}", rs.URL(), "${NODE}", fmt.Sprintf("node-%d", i+1), "${TIMEOUT}", timeout}, yamlEdits...)...).Replace(clusterYAML)
		node := assemble(t, yml, int64(i+1))
		srv := httptest.NewServer(node.Handler())
		t.Cleanup(func() {
			srv.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = node.Close(ctx)
		})
		nodes, srvs = append(nodes, node), append(srvs, srv)
	}
	return rs, nodes, srvs
}

func post(t *testing.T, url, key, body string, hdr ...string) (*http.Response, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Errorf("request: %v", err)
		return nil, ""
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

const chatBody = `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`

// burst sends total concurrent requests spread round-robin over the
// replicas and counts the statuses.
func burst(t *testing.T, srvs []*httptest.Server, key, body string, total int) map[int]int {
	t.Helper()
	var mu sync.Mutex
	counts := map[int]int{}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < total; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			<-start
			resp, _ := post(t, srvs[i%len(srvs)].URL+"/v1/chat/completions", key, body)
			if resp == nil {
				return
			}
			mu.Lock()
			counts[resp.StatusCode]++
			mu.Unlock()
		}(i)
	}
	close(start)
	wg.Wait()
	return counts
}

func TestClusterRPMExact(t *testing.T) {
	_, nodes, srvs := startCluster(t, 3, "2s")
	start := time.Now()
	counts := burst(t, srvs, "sk-rpm", chatBody, 200)
	elapsed := time.Since(start)
	// GCRA returns capacity continuously (one request per second at rpm
	// 60): a burst that took longer than a second on this shared machine
	// may see that refill, and no more.
	refill := int(elapsed / time.Second)
	if counts[200] < 60 || counts[200] > 60+refill || counts[200]+counts[429] != 200 {
		t.Fatalf("rpm 60 over 3 replicas: want 60 admitted (+%d refilled during the %v burst), got %v", refill, elapsed, counts)
	}
	for _, n := range nodes {
		if f := fallbackCount(t, n, "ratelimit"); f != 0 {
			t.Fatalf("%s fell back to the local limiter %v times: not a test of the shared one", n.Config.Server.NodeID, f)
		}
	}
}

// fallbackCount reads switchyard_redis_fallback_total{component}.
func fallbackCount(t *testing.T, n *Node, component string) float64 {
	t.Helper()
	mfs, err := n.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "switchyard_redis_fallback_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "component" && l.GetValue() == component {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

func TestClusterMaxParallelExact(t *testing.T) {
	rs, _, srvs := startCluster(t, 3, "2s")
	body := `{"model":"slowm","messages":[{"role":"user","content":"hi"}]}`
	counts := burst(t, srvs, "sk-par", body, 30)
	if counts[200] != 5 || counts[429] != 25 {
		t.Fatalf("max_parallel 5 over 3 replicas: want 5 served and 25 rejected, got %v", counts)
	}
	// slots were released on every exit path (asynchronously, after the
	// response): once the slot set is empty, a new wave gets 5 again
	waitSlotsFree(t, rs, "sytest:{team:par5}:")
	counts = burst(t, srvs, "sk-par", body, 10)
	if counts[200] != 5 {
		t.Fatalf("slots leaked: second wave served %v", counts)
	}
}

func TestClusterTPMExact(t *testing.T) {
	_, _, srvs := startCluster(t, 3, "2s")
	// estimate per request: ceil(2/4)+4+3 prompt = 8, plus max_tokens 92 =
	// 100. The slow model keeps every request in flight during the burst,
	// so no reconciliation frees tokens before the burst is decided.
	body := `{"model":"slowm","max_tokens":92,"messages":[{"role":"user","content":"hi"}]}`
	start := time.Now()
	counts := burst(t, srvs, "sk-tpm", body, 60)
	// capacity returns at 2000/60 tokens per second: one more 100-token
	// request per three seconds the burst took to arrive
	refill := int(time.Since(start).Seconds() * 2000 / 60 / 100)
	if counts[200] < 20 || counts[200] > 20+refill || counts[200]+counts[429] != 60 {
		t.Fatalf("tpm 2000 at 100 tokens each over 3 replicas: want 20 (+%d refill), got %v", refill, counts)
	}
	// reconciliation: each served request really used 8+4 tokens, so the
	// refunds (written asynchronously) give most of the minute back
	deadline := time.Now().Add(5 * time.Second)
	for {
		counts = burst(t, srvs, "sk-tpm", `{"model":"m","max_tokens":92,"messages":[{"role":"user","content":"hi"}]}`, 3)
		if counts[200] == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("refunds did not restore TPM capacity: %v", counts)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestClusterTierPinSharedAcrossReplicas(t *testing.T) {
	rs, _, srvs := startCluster(t, 3, "50ms")
	hard := `{"model":"normal","reasoning_effort":"high","messages":[{"role":"user","content":"prove it"}]}`
	resp, body := post(t, srvs[0].URL+"/v1/chat/completions", "sk-open", hard, "X-Session-Id", "conv-42")
	if resp == nil || resp.Header.Get("X-Switchyard-Tier") != "hard" {
		t.Fatalf("escalation on replica 1: %v %s", resp.Header, body)
	}
	waitUntilTrue(t, "tier pin in Redis", func() bool {
		keys, _ := rs.Client().Keys(context.Background(), "sytest:{team:open}:pt:*").Result()
		return len(keys) == 1
	})
	thanks := `{"model":"normal","messages":[{"role":"user","content":"thanks!"}]}`
	for _, srv := range srvs[1:] {
		deadline := time.Now().Add(3 * time.Second)
		for {
			resp, _ := post(t, srv.URL+"/v1/chat/completions", "sk-open", thanks, "X-Session-Id", "conv-42")
			if resp != nil && resp.Header.Get("X-Switchyard-Tier") == "hard" && resp.Header.Get("X-Switchyard-Tier-Source") == "pinned" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("pin not honoured on another replica: %v", resp.Header)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// another session stays easy
	resp, _ = post(t, srvs[2].URL+"/v1/chat/completions", "sk-open", thanks, "X-Session-Id", "other")
	if resp.Header.Get("X-Switchyard-Tier") != "easy" {
		t.Fatalf("unrelated session: %v", resp.Header)
	}
}

func TestClusterDeploymentPinSharedAcrossReplicas(t *testing.T) {
	rs, _, srvs := startCluster(t, 3, "50ms")
	resp, _ := post(t, srvs[0].URL+"/v1/chat/completions", "sk-open", chatBody, "X-Session-Id", "agent-7")
	served := resp.Header.Get("X-Switchyard-Deployment")
	// the pin is written after the response, asynchronously; a conversation's
	// next turn comes later than that, so wait until it is in Redis
	c := rs.Client()
	waitUntilTrue(t, "deployment pin in Redis", func() bool {
		keys, _ := c.Keys(context.Background(), "sytest:{team:open}:pd:*").Result()
		return len(keys) == 1
	})
	for i := 0; i < 20; i++ {
		srv := srvs[1+i%2]
		deadline := time.Now().Add(3 * time.Second)
		for {
			resp, _ := post(t, srv.URL+"/v1/chat/completions", "sk-open", chatBody, "X-Session-Id", "agent-7")
			if got := resp.Header.Get("X-Switchyard-Deployment"); got == served {
				break
			} else if time.Now().After(deadline) {
				t.Fatalf("session pinned to %s was served by %s on another replica", served, got)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func TestClusterCatalogChangePropagates(t *testing.T) {
	_, _, srvs := startCluster(t, 3, "50ms")
	resp, body := func() (*http.Response, string) {
		req, _ := http.NewRequest("PUT", srvs[0].URL+"/admin/deployments/n1", strings.NewReader(`{"model":"fresh","provider":"sim"}`))
		req.Header.Set("Authorization", "Bearer admin-secret")
		r, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		return r, string(b)
	}()
	if resp.StatusCode != 200 {
		t.Fatalf("admin put: %d %s", resp.StatusCode, body)
	}
	changed := time.Now()
	fresh := `{"model":"fresh","messages":[{"role":"user","content":"hi"}]}`
	for _, srv := range srvs[1:] {
		for {
			resp, body := post(t, srv.URL+"/v1/chat/completions", "sk-open", fresh)
			if resp != nil && resp.StatusCode == 200 {
				break
			}
			if time.Since(changed) > time.Second {
				t.Fatalf("replica %s did not serve the new deployment within a second: %s", srv.URL, body)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// TestClusterRedisKilledMidLoad: no request fails because Redis died, none
// waits much longer than redis.timeout on it, the limiter falls back, and
// after a restart the nodes return to shared state by themselves.
func TestClusterRedisKilledMidLoad(t *testing.T) {
	rs, nodes, srvs := startCluster(t, 3, "50ms")
	var failed, slow, total atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 12; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				start := time.Now()
				resp, body := post(t, srvs[(w+i)%3].URL+"/v1/chat/completions", "sk-open", chatBody, "X-Session-Id", fmt.Sprintf("s%d", w))
				total.Add(1)
				if resp == nil || resp.StatusCode != 200 {
					failed.Add(1)
					t.Logf("failed: %v %s", resp, body)
				}
				if time.Since(start) > time.Second { // bounded; go-redis defaults would hang 5 s per call
					slow.Add(1)
				}
			}
		}(w)
	}
	time.Sleep(300 * time.Millisecond)
	versions := make([]int64, len(nodes))
	for i, n := range nodes {
		versions[i] = n.Catalog.Load().Version
	}
	rs.Kill()
	time.Sleep(700 * time.Millisecond)
	down := nodes[0].RedisState()
	rs.Restart() // empty: --save ""
	for i, srv := range srvs {
		// ready while Redis is gone and once it is back empty; the catalog kept
		if w := do(t, srv.Config.Handler, "GET", "/readyz", "", ""); w.Code != 200 {
			t.Fatalf("/readyz on node %d after Redis restarted empty: %d %s", i, w.Code, w.Body)
		}
		if v := nodes[i].Catalog.Load().Version; v != versions[i] {
			t.Fatalf("node %d catalog version %d after Redis restarted empty, was %d: not kept", i, v, versions[i])
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for nodes[0].RedisState() != "up" || nodes[1].RedisState() != "up" || nodes[2].RedisState() != "up" {
		if time.Now().After(deadline) {
			t.Fatalf("nodes did not return to shared state: %s %s %s", nodes[0].RedisState(), nodes[1].RedisState(), nodes[2].RedisState())
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	close(stop)
	wg.Wait()
	if down != "down" {
		t.Errorf("node did not notice Redis was down (state %q)", down)
	}
	if failed.Load() != 0 {
		t.Fatalf("%d of %d requests failed because Redis died", failed.Load(), total.Load())
	}
	if slow.Load() != 0 {
		t.Fatalf("%d requests waited over 1s while Redis was down", slow.Load())
	}
	t.Logf("%d requests, none failed or waited on the dead Redis", total.Load())
}

func waitSlotsFree(t *testing.T, rs *redistest.Server, prefix string) {
	t.Helper()
	c := rs.Client()
	deadline := time.Now().Add(5 * time.Second)
	for {
		keys, _ := c.Keys(context.Background(), prefix+"*").Result()
		busy := int64(0)
		for _, k := range keys {
			if typ, _ := c.Type(context.Background(), k).Result(); typ == "zset" {
				busy += c.ZCard(context.Background(), k).Val()
			}
		}
		if busy == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d parallel slots still held 5s after every response", busy)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

type markerKey struct{}

// tripCounter counts Redis round trips made with a request's context (the
// marker), ignoring the asynchronous writers, which use their own.
type tripCounter struct{ n atomic.Int64 }

func (h *tripCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *tripCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if ctx.Value(markerKey{}) != nil && !connSetup(cmd) {
			h.n.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (h *tripCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if ctx.Value(markerKey{}) != nil && !connSetup(cmds[0]) {
			h.n.Add(1)
		}
		return next(ctx, cmds)
	}
}

// connSetup reports go-redis's handshake on a new pooled connection (HELLO,
// CLIENT SETINFO): once per connection, not per request.
func connSetup(cmd redis.Cmder) bool {
	name := cmd.Name()
	return name == "hello" || name == "client"
}

// TestClusterOneRoundTripBeforeUpstream: edge limits, the tier pin and the
// deployment pins of a smart-routed session request travel in one pipeline.
func TestClusterOneRoundTripBeforeUpstream(t *testing.T) {
	_, nodes, _ := startCluster(t, 1, "2s")
	n := nodes[0]
	counter := &tripCounter{}
	n.Redis.AddHook(counter)
	for i, body := range []string{
		`{"model":"normal","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"normal","reasoning_effort":"high","messages":[{"role":"user","content":"prove it"}]}`,
		`{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
	} {
		counter.n.Store(0)
		req := httptest.NewRequest("POST", "/v1/chat/completions", strings.NewReader(body))
		req = req.WithContext(context.WithValue(req.Context(), markerKey{}, true))
		req.Header.Set("Authorization", "Bearer sk-rpm")
		req.Header.Set("X-Session-Id", "trip-session")
		w := httptest.NewRecorder()
		n.Handler().ServeHTTP(w, req)
		if w.Code != 200 {
			t.Fatalf("request %d: %d %s", i, w.Code, w.Body)
		}
		if got := counter.n.Load(); got != 1 {
			t.Fatalf("request %d made %d Redis round trips on the request path, want 1", i, got)
		}
	}
}

func waitUntilTrue(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestClusterUsageNoneMissingAtSaturation: at saturation across three
// replicas, every request's cost reaches the team's budget counter in
// Redis; none is dropped by the asynchronous writers.
func TestClusterUsageNoneMissingAtSaturation(t *testing.T) {
	rs, nodes, srvs := startCluster(t, 3, "2s")
	const total, workers = 1500, 48
	var mu sync.Mutex
	var want float64
	var served int
	var wg sync.WaitGroup
	jobs := make(chan int)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				resp, body := post(t, srvs[i%3].URL+"/v1/chat/completions", "sk-budget", chatBody)
				if resp == nil || resp.StatusCode != 200 {
					t.Errorf("request %d: %v %s", i, resp, body)
					continue
				}
				var r struct {
					Usage struct {
						PromptTokens     int `json:"prompt_tokens"`
						CompletionTokens int `json:"completion_tokens"`
					} `json:"usage"`
				}
				if err := json.Unmarshal([]byte(body), &r); err != nil {
					t.Error(err)
					continue
				}
				// d1 and d2 both cost 1 USD per million input and 2 per million output tokens
				cost := (float64(r.Usage.PromptTokens)*1 + float64(r.Usage.CompletionTokens)*2) / 1e6
				mu.Lock()
				want += cost
				served++
				mu.Unlock()
			}
		}()
	}
	for i := 0; i < total; i++ {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	// a clean shutdown flushes whatever is still pending
	for _, n := range nodes {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := n.Close(ctx); err != nil {
			t.Fatalf("close: %v", err)
		}
		cancel()
	}
	got, err := rs.Client().HGet(context.Background(), "sytest:{team:budget}:budget", "usd").Float64()
	if err != nil {
		t.Fatalf("reading spend: %v", err)
	}
	if served != total || math.Abs(got-want) > 1e-9*want {
		t.Fatalf("spend in Redis %.9f USD, sum of %d served responses %.9f USD: usage went missing", got, served, want)
	}
	t.Logf("%d requests over 3 replicas: %.6f USD in Redis, %.6f USD served", served, got, want)
}

// slowProxy forwards TCP to target, delaying every chunk by the current
// delay: a Redis that is up but slow.
type slowProxy struct {
	ln    net.Listener
	delay atomic.Int64
}

func newSlowProxy(t *testing.T, target string) *slowProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &slowProxy{ln: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c, target)
		}
	}()
	return p
}

func (p *slowProxy) serve(c net.Conn, target string) {
	defer c.Close()
	u, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer u.Close()
	pipe := func(dst, src net.Conn) {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				time.Sleep(time.Duration(p.delay.Load()))
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}
	go pipe(u, c)
	pipe(c, u)
}

// TestClusterSlowRedis: a Redis that answers slowly bounds every request
// by redis.timeout, opens the breaker (then requests do not wait at all),
// and the node returns to shared state once Redis is fast again.
func TestClusterSlowRedis(t *testing.T) {
	rs := redistest.Start(t)
	proxy := newSlowProxy(t, rs.Addr())
	yml := strings.NewReplacer("${REDIS}", "redis://"+proxy.ln.Addr().String()+"/0", "${NODE}", "slow-1", "${TIMEOUT}", "50ms").Replace(clusterYAML)
	n := assemble(t, yml, 1)
	defer n.Close(context.Background())
	h := n.Handler()
	send := func() (int, time.Duration) {
		start := time.Now()
		w := do(t, h, "POST", "/v1/chat/completions", "sk-rpm", chatBody)
		return w.Code, time.Since(start)
	}
	if code, _ := send(); code != 200 {
		t.Fatalf("fast redis: %d", code)
	}
	proxy.delay.Store(int64(300 * time.Millisecond))
	var worst time.Duration
	// 15: the fallback allows rpm 60 / 3 replicas = 20 a minute, minus what
	// the shared limiter already admitted (the local state mirrors it)
	for i := 0; i < 15; i++ {
		code, d := send()
		if code != 200 {
			t.Fatalf("slow redis made request %d fail: %d", i, code)
		}
		worst = max(worst, d)
	}
	// one Redis call on the request path, bounded by 50ms; generous slack
	// for a loaded two-core machine and the race detector
	if worst > 400*time.Millisecond {
		t.Fatalf("a request waited %v on a slow Redis (redis.timeout 50ms)", worst)
	}
	if n.RedisState() != "down" {
		t.Fatalf("breaker did not open on a slow Redis: %s", n.RedisState())
	}
	opens := make([]time.Duration, 21)
	for i := range opens {
		_, opens[i] = send() // a 429 from the local limiter is as quick as a 200
	}
	slices.Sort(opens)
	open := opens[len(opens)/2] // the median: scheduling noise on a loaded machine is not Redis
	if open > 40*time.Millisecond {
		t.Fatalf("with the breaker open a request still took %v (median)", open)
	}
	proxy.delay.Store(0)
	waitUntilTrue(t, "breaker to close after Redis is fast again", func() bool {
		send()
		return n.RedisState() == "up"
	})
	t.Logf("slow Redis: worst request %v, with the breaker open %v", worst.Round(time.Millisecond), open.Round(time.Millisecond))
}

func adminReq(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer admin-secret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, string(b)
}

// TestClusterAdminAndPersistence: /admin/cluster lists the replicas; admin
// changes live in Redis and survive a restart of every node (the config
// file seeds only once); with Redis down, admin writes answer 503 and
// change nothing.
func TestClusterAdminAndPersistence(t *testing.T) {
	rs, nodes, srvs := startCluster(t, 3, "50ms")
	waitUntilTrue(t, "three nodes in /admin/cluster", func() bool {
		_, body := adminReq(t, "GET", srvs[0].URL+"/admin/cluster", "")
		return strings.Count(body, `"node":"node-`) >= 4 // this node + three heartbeats
	})
	if code, body := adminReq(t, "PUT", srvs[1].URL+"/admin/fallbacks", `{"primaryModel":"m","reason":"context_window","fallbackModels":["strong"]}`); code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	if code, body := adminReq(t, "DELETE", srvs[1].URL+"/admin/deployments/d2", ""); code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	// restart: new nodes on the same Redis read the stored catalog
	for _, n := range nodes {
		_ = n.Close(context.Background())
	}
	yml := strings.NewReplacer("${REDIS}", rs.URL(), "${NODE}", "node-new", "${TIMEOUT}", "50ms").Replace(clusterYAML)
	n2 := assemble(t, yml, 9)
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second) // Redis is down by then
		defer cancel()
		_ = n2.Close(ctx)
	}()
	snap := n2.Catalog.Load()
	if _, ok := snap.Deployments["d2"]; ok {
		t.Fatal("a deleted deployment came back after restart: the config must seed only once")
	}
	if got := snap.Chain("m", "context_window"); len(got) != 1 || got[0] != "strong" {
		t.Fatalf("chain lost across restart: %v", got)
	}
	srv := httptest.NewServer(n2.Handler())
	defer srv.Close()
	rs.Kill()
	before := n2.Catalog.Load().Version
	code, body := adminReq(t, "PUT", srv.URL+"/admin/fallbacks", `{"primaryModel":"m","fallbackModels":["strong"]}`)
	if code != 503 {
		t.Fatalf("admin write with Redis down: %d %s", code, body)
	}
	if n2.Catalog.Load().Version != before || len(n2.Catalog.Load().Chain("m", "general")) != 0 {
		t.Fatal("a refused admin write changed the catalog")
	}
	// the last catalog copy keeps serving
	if resp, body := post(t, srv.URL+"/v1/chat/completions", "sk-open", chatBody); resp == nil || resp.StatusCode != 200 {
		t.Fatalf("serving with Redis down: %v %s", resp, body)
	}
}

// TestClusterStartsWithRedisDown: a replica started while Redis is down
// serves the config file's catalog with local limits, and joins the shared
// catalog once Redis answers.
func TestClusterStartsWithRedisDown(t *testing.T) {
	rs := redistest.Start(t)
	rs.Kill()
	yml := strings.NewReplacer("${REDIS}", rs.URL(), "${NODE}", "late-1", "${TIMEOUT}", "50ms").Replace(clusterYAML)
	cfg, err := config.Load([]byte(yml), nil)
	if err != nil {
		t.Fatal(err)
	}
	n, err := Assemble(cfg, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Seed: 1})
	if err != nil {
		t.Fatalf("a replica must start while Redis is down: %v", err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = n.Close(ctx)
	}()
	if w := do(t, n.Handler(), "POST", "/v1/chat/completions", "sk-rpm", chatBody); w.Code != 200 {
		t.Fatalf("serving with Redis down since start: %d %s", w.Code, w.Body)
	}
	rs.Restart()
	// another replica stores a changed catalog; the late one picks it up
	other, err := Assemble(cfg, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(context.Background())
	srv := httptest.NewServer(other.Handler())
	defer srv.Close()
	if code, body := adminReq(t, "POST", srv.URL+"/admin/deployments/d2/disable", ""); code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	// the change notice, or at the latest the 5s poll, brings it
	deadline := time.Now().Add(15 * time.Second)
	for {
		if d := n.Catalog.Load().Deployments["d2"]; d != nil && !d.On {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the late replica never loaded the shared catalog")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestClusterExpectedReplicasZero: with redis.expected_replicas 0 each node
// divides its local fallback by the live node count of its last heartbeats
// (SPEC 9): three live nodes, Redis killed, a node alone admits rpm/3.
func TestClusterExpectedReplicasZero(t *testing.T) {
	rs, nodes, srvs := startCluster(t, 3, "50ms", "expected_replicas: 3", "expected_replicas: 0")
	waitUntilTrue(t, "every node to count 3 live nodes", func() bool {
		for _, n := range nodes {
			if n.hb.Live() != 3 {
				return false
			}
		}
		return true
	})
	rs.Kill()
	admitted := 0
	for range 60 {
		resp, _ := post(t, srvs[0].URL+"/v1/chat/completions", "sk-rpm", chatBody)
		if resp != nil && resp.StatusCode == 200 {
			admitted++
		}
	}
	// rpm 60 / 3 live nodes = 20; the local bucket refills one request every
	// 3 s, so a slow run may see one more
	if admitted < 20 || admitted > 21 {
		t.Fatalf("Redis down, 3 live nodes, rpm 60: node admitted %d locally, want 20", admitted)
	}
	rs.Restart() // the nodes' Close then flushes at once instead of waiting out its bound
}

// cutProxy forwards TCP to target until it is cut: then it drops every
// connection and refuses new ones (a Redis that is gone, with its data kept
// for when it is back).
type cutProxy struct {
	ln    net.Listener
	down  atomic.Bool
	mu    sync.Mutex
	conns map[net.Conn]bool
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, conns: map[net.Conn]bool{}}
	t.Cleanup(func() { ln.Close(); p.cut() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if p.down.Load() {
				c.Close()
				continue
			}
			u, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns[c], p.conns[u] = true, true
			p.mu.Unlock()
			go func() { _, _ = io.Copy(u, c); u.Close() }()
			go func() { _, _ = io.Copy(c, u); c.Close() }()
		}
	}()
	return p
}

func (p *cutProxy) cut() {
	p.down.Store(true)
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.conns = map[net.Conn]bool{}
	p.mu.Unlock()
}

// TestClusterRedisDownLongUsageExact: Redis becomes unreachable under load
// over three replicas and stays away for a while: no request fails, p99
// during the outage stays within redis.timeout (plus scheduling slack on a
// loaded machine) of p99 before it, and once Redis is back the usage in
// Redis (requests and tokens per team and deployment) equals what was
// served, to the request and the token.
func TestClusterRedisDownLongUsageExact(t *testing.T) {
	rs := redistest.Start(t)
	proxy := newCutProxy(t, rs.Addr())
	var nodes []*Node
	var srvs []*httptest.Server
	for i := range 3 {
		yml := strings.NewReplacer("${REDIS}", "redis://"+proxy.ln.Addr().String()+"/0", "${NODE}", fmt.Sprintf("down-%d", i), "${TIMEOUT}", "50ms").Replace(clusterYAML)
		n := assemble(t, yml, int64(i+1))
		srv := httptest.NewServer(n.Handler())
		t.Cleanup(srv.Close)
		nodes, srvs = append(nodes, n), append(srvs, srv)
	}
	var (
		mu             sync.Mutex
		served, tokens int
		failed         int
		before, during []time.Duration
		phase          atomic.Int32 // 0 before, 1 during, 2 after
		stop           = make(chan struct{})
		wg             sync.WaitGroup
	)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				ph := phase.Load()
				start := time.Now()
				resp, body := post(t, srvs[(w+i)%3].URL+"/v1/chat/completions", "sk-budget", chatBody)
				took := time.Since(start)
				var r struct {
					Usage struct {
						TotalTokens int `json:"total_tokens"`
					} `json:"usage"`
				}
				mu.Lock()
				if resp == nil || resp.StatusCode != 200 || json.Unmarshal([]byte(body), &r) != nil {
					failed++
				} else {
					served++
					tokens += r.Usage.TotalTokens
				}
				switch ph {
				case 0:
					before = append(before, took)
				case 1:
					during = append(during, took)
				}
				mu.Unlock()
			}
		}()
	}
	time.Sleep(time.Second)
	proxy.cut()
	phase.Store(1)
	time.Sleep(3 * time.Second)
	proxy.down.Store(false)
	phase.Store(2)
	waitUntilTrue(t, "every node back on shared state", func() bool {
		for _, n := range nodes {
			if n.RedisState() != "up" {
				return false
			}
		}
		return true
	})
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wg.Wait()
	for _, n := range nodes {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := n.Close(ctx); err != nil {
			t.Fatalf("close: %v", err)
		}
		cancel()
	}
	p99 := func(d []time.Duration) time.Duration {
		if len(d) == 0 {
			return 0
		}
		slices.Sort(d)
		return d[len(d)*99/100]
	}
	pb, pd := p99(before), p99(during)
	t.Logf("served %d (%d before, %d during the outage), failed %d; p99 before %v, during %v", served, len(before), len(during), failed, pb, pd)
	if failed != 0 {
		t.Fatalf("%d requests failed while Redis was gone", failed)
	}
	if len(during) == 0 {
		t.Fatal("no request during the outage")
	}
	if pd > pb+50*time.Millisecond+150*time.Millisecond {
		t.Fatalf("p99 during the outage %v, before %v: more than redis.timeout (+150ms slack) apart", pd, pb)
	}
	h, err := rs.Client().HGetAll(context.Background(), "sytest:{team:budget}:usage").Result()
	if err != nil {
		t.Fatal(err)
	}
	var req, tok int
	for k, v := range h {
		var n int
		fmt.Sscan(v, &n)
		if strings.HasSuffix(k, "|req") {
			req += n
		} else if strings.HasSuffix(k, "|tok") {
			tok += n
		}
	}
	if req != served || tok != tokens {
		t.Fatalf("usage in Redis after the outage: %d requests, %d tokens; served %d requests, %d tokens", req, tok, served, tokens)
	}
}
