package node

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"switchyard/cluster"
	"switchyard/config"
	"switchyard/internal/redistest"
)

// beginCounter counts, per team, the admission scripts (edge Begin: keys
// tat, par, budget of one team) that Redis answered: a request decided in
// shared state makes exactly one; one decided locally makes none.
type beginCounter struct {
	mu   sync.Mutex
	ok   map[string]int   // team hash-tag base -> answered Begin scripts
	errs map[string]error // team hash-tag base -> last error of a Begin script
	bad  map[string]int   // team hash-tag base -> Begin scripts that failed
}

func (h *beginCounter) count(cmd redis.Cmder) {
	a := cmd.Args()
	if len(a) < 5 || (cmd.Name() != "evalsha" && cmd.Name() != "eval") {
		return
	}
	k1, _ := a[3].(string)
	k2, _ := a[4].(string)
	// beginLua's keys start tat, par; gcraLua's (a team with RPM and TPM
	// only, no pins here) are one tat key, then ARGV: 1 (one team on
	// Cluster), rpm, tpm, two resets, the number of admissions
	lean := asInt(a[2]) == 1 && strings.HasSuffix(k1, "}:tat") && len(a) >= 10 && asInt(a[4]) == 1
	if !lean && (!strings.HasSuffix(k1, "}:tat") || !strings.HasSuffix(k2, "}:par")) {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := cmd.Err(); err != nil {
		if h.errs == nil {
			h.errs, h.bad = map[string]error{}, map[string]int{}
		}
		h.errs[strings.TrimSuffix(k1, "tat")] = err
		h.bad[strings.TrimSuffix(k1, "tat")]++
		return
	}
	if lean {
		h.ok[strings.TrimSuffix(k1, "tat")] += max(1, asInt(a[9]))
		return
	}
	h.ok[strings.TrimSuffix(k1, "tat")] += admissions(a)
}

// admissions is how many admissions one Begin script call decided: on
// Cluster the edge state sends the concurrent admissions of a team in one
// call of that one team (ARGV 10 is the number of releases, followed by them
// and the number of admissions).
func admissions(a []any) int {
	nk, ok := a[2].(int)
	if !ok || len(a) < 3+nk+11 {
		return 1
	}
	argv := a[3+nk:]
	nrel := asInt(argv[9])
	if len(argv) <= 10+nrel {
		return 1
	}
	return max(1, asInt(argv[10+nrel]))
}

func asInt(v any) int {
	switch x := v.(type) {
	case int:
		return x
	case int64:
		return int(x)
	}
	return 0
}

func (h *beginCounter) of(prefix, team string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ok[cluster.TeamKey(prefix, team, "")]
}

// failures is how many of team's Begin scripts failed, and the last error.
func (h *beginCounter) failures(prefix, team string) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	k := cluster.TeamKey(prefix, team, "")
	return h.bad[k], h.errs[k]
}

func (h *beginCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *beginCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.count(cmd)
		return err
	}
}
func (h *beginCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, c := range cmds {
			h.count(c)
		}
		return err
	}
}

// TestRedisClusterMasterKilled is issue 16's gateway-level Cluster test:
// three gateways on a Redis Cluster of 3 masters and 3 replicas, a master
// SIGKILLed under load. No request fails; teams on the killed shard are
// exact again within 10 s of the promotion (measured: well under a second);
// teams on the other shards never leave shared state (every one of their
// requests was admitted by a Begin script Redis answered) and stay exact.
func TestRedisClusterMasterKilled(t *testing.T) {
	rc := redistest.StartCluster(t, 3)
	const prefix = "syc:"
	shards := rc.Shards()
	killed := shards[0]
	masterOf := func(team string) string { return rc.MasterOf(cluster.Slot(cluster.TeamKey(prefix, team, "tat"))) }

	// Teams: a busy one per shard (limits far above the load) and rpm-10
	// probes, fresh for each exactness check.
	load := map[string]string{} // shard master -> team
	var probes []string         // on the killed shard
	var healthyProbe string     // on another shard
	for i := 0; len(load) < 3 || len(probes) < 20 || healthyProbe == ""; i++ {
		name := fmt.Sprintf("t%d", i)
		m := masterOf(name)
		switch {
		case load[m] == "":
			load[m] = name
		case m == killed.Master && len(probes) < 20:
			probes = append(probes, name)
		case m != killed.Master && healthyProbe == "":
			healthyProbe = name
		}
		if i > 10000 {
			t.Fatal("could not place teams on every shard")
		}
	}
	var teams strings.Builder
	for _, name := range load {
		fmt.Fprintf(&teams, "  - {name: %s, keys: [sk-%s], models: ['*'], rpm: 1000000}\n", name, name)
	}
	for _, name := range append(append([]string{}, probes...), healthyProbe) {
		fmt.Fprintf(&teams, "  - {name: %s, keys: [sk-%s], models: ['*'], rpm: 10}\n", name, name)
	}
	yml := fmt.Sprintf(`
server: {node_id: "%%s"}
redis: {addrs: [%s], timeout: 1s, expected_replicas: 3, key_prefix: %q}
providers:
  - {name: sim, kind: simulated, simulate: {ttfb: 0s, tokens_per_second: 100000, output_tokens: 4}}
deployments:
  - {id: d1, model: m, provider: sim}
teams:
%s`, strings.Join(rc.Addrs(), ", "), prefix, teams.String())
	// redis.timeout 1s, not 50ms: three gateways, six Redis nodes and the
	// load share two cores (with the other packages' tests, under -race); a
	// healthy shard's call that misses the timeout goes local (correctly,
	// SPEC 9) and is not what this tests. The dead master refuses
	// connections at once, so the timeout does not slow the failover.

	counter := &beginCounter{ok: map[string]int{}}
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
		n.Redis.AddHook(counter)
		srv := httptest.NewServer(n.Handler())
		t.Cleanup(func() {
			srv.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_ = n.Close(ctx)
		})
		srvs = append(srvs, srv)
	}

	// Load: every shard's busy team, round-robin over the gateways.
	var failed atomic.Int64
	sent := map[string]*atomic.Int64{}
	for _, name := range load {
		sent[name] = &atomic.Int64{}
	}
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; ctx.Err() == nil; i++ {
				for _, name := range load {
					resp, body := post(t, srvs[i%3].URL+"/v1/chat/completions", "sk-"+name, chatBody)
					sent[name].Add(1)
					if resp == nil || resp.StatusCode != 200 {
						failed.Add(1)
						t.Logf("failed: %v %s", resp, body)
					}
				}
				time.Sleep(2 * time.Millisecond) // steady load, short of saturating the two shared cores
			}
		}()
	}
	defer func() { stop(); wg.Wait() }()
	time.Sleep(300 * time.Millisecond)

	// exact bursts 30 concurrent requests of an rpm-10 team over the three
	// gateways: exactly 10 admitted, every one decided by Redis.
	exact := func(team string) (bool, string) {
		before := counter.of(prefix, team)
		counts := burst(t, srvs, "sk-"+team, chatBody, 30)
		shared := counter.of(prefix, team) - before
		return counts[200] == 10 && counts[429] == 20 && shared == 30, fmt.Sprintf("%v, %d of 30 decided in Redis", counts, shared)
	}

	rc.Kill(killed.Master)
	killedAt := time.Now()
	if ok, got := exact(healthyProbe); !ok {
		t.Errorf("team on a healthy shard not exact while another shard fails over: %s", got)
	}
	promotedAt := rc.WaitPromoted(killed.Replicas[0], 20*time.Second)
	var exactAt time.Time
	var last string
	for _, team := range probes {
		ok, got := exact(team)
		if ok {
			exactAt = time.Now()
			break
		}
		last = got
		if time.Since(promotedAt) > 10*time.Second {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // load on the promoted replica
	stop()
	wg.Wait()

	if exactAt.IsZero() {
		t.Fatalf("killed shard's teams not exact within 10s of the promotion (last burst: %s)", last)
	}
	t.Logf("master SIGKILLed; replica promoted %v later; its teams exact again %v after the promotion",
		promotedAt.Sub(killedAt).Round(time.Millisecond), exactAt.Sub(promotedAt).Round(time.Millisecond))
	if exactAt.Sub(promotedAt) > 10*time.Second {
		t.Errorf("exact again %v after the promotion, want within 10s", exactAt.Sub(promotedAt))
	}
	if n := failed.Load(); n != 0 {
		t.Errorf("%d requests failed during the failover, want 0", n)
	}
	for m, name := range load {
		if m == killed.Master {
			continue
		}
		// Every request of a healthy shard's team was sent to Redis: one
		// that was decided locally must be one whose own call failed (a
		// stall of this loaded machine beyond redis.timeout), never one
		// sent local because another shard was down.
		s, b := sent[name].Load(), counter.of(prefix, name)
		nf, lastErr := counter.failures(prefix, name)
		if int64(b+nf) != s {
			t.Errorf("team %s on a healthy shard: %d requests, %d decided in Redis, %d own calls failed; %d went local without asking Redis",
				name, s, b, nf, s-int64(b+nf))
		}
		if nf > 1 {
			t.Errorf("team %s on a healthy shard: %d of %d calls failed (last: %v); want at most one stall", name, nf, s, lastErr)
		}
		t.Logf("team %s on a healthy shard: %d requests, %d decided in Redis, %d own calls failed (%v)", name, s, b, nf, lastErr)
	}
}
