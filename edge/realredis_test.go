package edge

import (
	"bufio"
	"context"
	"math"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"switchyard/catalog"
	"switchyard/cluster"
	"switchyard/config"
	"switchyard/internal/redistest"
	"switchyard/internal/teamtest"
	"switchyard/telemetry"
)

// replica is one node's edge state on a real Redis, with production client
// settings (cluster.NewClient) and the writer running.
func replica(t *testing.T, url string, timeout, lease time.Duration, divisor int) (*Redis, *countObs) {
	t.Helper()
	c, br, err := cluster.NewClient(config.Redis{URL: url, Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	obs := &countObs{}
	r := NewRedis(c, br, Config{Prefix: "sy:", Timeout: timeout, SlotLease: lease, Divisor: divisor}, nil, nil, nil, obs)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = r.Close(ctx)
		_ = c.Close()
	})
	return r, obs
}

// burstBegin runs n Begins concurrently, the i-th on states[i%len].
func burstBegin(t *testing.T, states []State, team *catalog.Team, tokens int64, n int) (allowed int, kinds map[string]int) {
	t.Helper()
	var mu sync.Mutex
	kinds = map[string]int{}
	var start, wg sync.WaitGroup
	start.Add(1)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start.Wait()
			b, err := states[i%len(states)].Begin(context.Background(), &Request{RequestID: reqID(i), Team: team, Tokens: tokens})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				t.Error(err)
				return
			}
			if b.Decision.Allowed {
				allowed++
				if b.t.local {
					kinds["local"]++
				}
			} else {
				kinds[b.Decision.Kind]++
			}
		}()
	}
	runtime.Gosched()
	start.Done()
	wg.Wait()
	return allowed, kinds
}

// TestRealClusterExact: three replicas share one real Redis; a burst of 200
// concurrent admissions spread over them admits exactly min(burst, limit)
// for each dimension, every one decided in Redis.
func TestRealClusterExact(t *testing.T) {
	srv := redistest.Start(t)
	var states []State
	var obss []*countObs
	for range 3 {
		r, obs := replica(t, srv.URL(), 2*time.Second, 0, 3)
		states, obss = append(states, r), append(obss, obs)
	}
	for _, tc := range []struct {
		name   string
		team   teamtest.Limits
		tokens int64
		want   int
	}{
		{"rpm 60", teamtest.Limits{RPM: 60}, 0, 60},
		{"max_parallel 10", teamtest.Limits{Par: 10}, 0, 10},
		{"tpm 6000 by 100", teamtest.Limits{TPM: 6000}, 100, 60},
		{"all at once", teamtest.Limits{RPM: 50, TPM: 100000, Par: 40}, 100, 40},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, kinds := burstBegin(t, states, teamtest.Team("exact-"+tc.name, tc.team), tc.tokens, 200)
			if n != tc.want || kinds["local"] != 0 {
				t.Fatalf("%d of 200 admitted (%v), want exactly %d, none locally", n, kinds, tc.want)
			}
		})
	}
	for i, o := range obss {
		if n := o.fallbacks.Load(); n != 0 {
			t.Fatalf("replica %d fell back %d times", i, n)
		}
	}
}

// TestRealBurstOneReplica: a burst of several thousand concurrent
// admissions, far more than the connection pool, on one replica with the
// production redis.timeout admits exactly the limit, however starved the
// machine: an admission whose call failed is decided by a local state that
// has learnt what Redis admitted, and Redis learns what that local state
// admitted before it decides again (never both). On a loaded CI machine
// this admitted 156 while queued admissions gave up on a timer of their own.
func TestRealBurstOneReplica(t *testing.T) {
	srv := redistest.Start(t)
	r, _ := replica(t, srv.URL(), cluster.DefaultTimeout, 0, 1)
	// warm the pool and the script cache, as a node does before it is ready
	for range 20 {
		begin(t, r, teamtest.Team("warm", teamtest.Limits{RPM: 1e9}), 0)
	}
	n, kinds := burstBegin(t, []State{r}, teamtest.Team("burst", teamtest.Limits{RPM: 100}), 0, 3000)
	t.Logf("3000 concurrent: %d admitted, %v", n, kinds)
	if n != 100 {
		t.Fatalf("rpm 100, 3000 concurrent admissions on one replica: %d admitted (%v), want exactly 100", n, kinds)
	}
}

// TestRealSequentialMaxParallelOne: on a real Redis with the writer running,
// a strictly sequential client at max_parallel 1 is never refused.
func TestRealSequentialMaxParallelOne(t *testing.T) {
	srv := redistest.Start(t)
	r, obs := replica(t, srv.URL(), time.Second, 0, 1)
	team := teamtest.Team("seq", teamtest.Limits{Par: 1, RPM: 1e6})
	for i := range 300 {
		b := begin(t, r, team, 0)
		if !b.Decision.Allowed {
			t.Fatalf("request %d refused: %+v", i, b.Decision)
		}
		r.Finish(&b, &Outcome{Served: true})
	}
	if n := obs.fallbacks.Load(); n != 0 {
		t.Fatalf("%d fallbacks: not a test of the shared slots", n)
	}
}

// holderEnv makes the test binary a replica process that takes the one slot
// of a team and holds it, renewing its lease, until it is killed.
const holderEnv = "SWITCHYARD_EDGE_TEST_HOLDER"

func TestMain_holder(t *testing.T) {
	url := os.Getenv(holderEnv)
	if url == "" {
		t.Skip("helper process for TestRealKilledReplicaFreesSlot")
	}
	c := redis.NewClient(&redis.Options{Addr: strings.TrimSuffix(strings.TrimPrefix(url, "redis://"), "/0")})
	r := NewRedis(c, nil, Config{Prefix: "sy:", Timeout: time.Second, SlotLease: time.Second}, nil, nil, nil, nil)
	b, err := r.Begin(context.Background(), &Request{RequestID: "hold", Team: teamtest.Team("kill", teamtest.Limits{Par: 1})})
	if err != nil || !b.Decision.Allowed {
		os.Exit(3)
	}
	os.Stdout.WriteString("held\n")
	time.Sleep(30 * time.Second) // bounded: the parent kills it long before
	os.Exit(0)
}

// TestRealKilledReplicaFreesSlot: a replica process SIGKILLed while its
// request runs frees the slot within one lease (1s here), and not before:
// while it lives it renews the lease.
func TestRealKilledReplicaFreesSlot(t *testing.T) {
	srv := redistest.Start(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestMain_holder$")
	cmd.Env = append(os.Environ(), holderEnv+"="+srv.URL())
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(out).ReadString('\n')
		line <- s
	}()
	select {
	case s := <-line:
		if s != "held\n" {
			t.Fatalf("holder said %q", s)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("holder process never took the slot")
	}
	other, _ := replica(t, srv.URL(), time.Second, time.Second, 1)
	team := teamtest.Team("kill", teamtest.Limits{Par: 1})
	alive := time.Now().Add(2500 * time.Millisecond) // two and a half leases: renewals must keep it
	for time.Now().Before(alive) {
		if begin(t, other, team, 0).Decision.Allowed {
			t.Fatal("a live replica's slot was taken: its lease was not renewed")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	for !begin(t, other, team, 0).Decision.Allowed {
		if time.Since(killed) > 3*time.Second {
			t.Fatal("the killed replica's slot was still held 3 leases later")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// within one lease of its last renewal (a third of a lease before the kill at worst)
	if took := time.Since(killed); took > time.Second+500*time.Millisecond {
		t.Fatalf("slot free %v after the kill, lease 1s", took)
	}
	t.Logf("slot of the SIGKILLed replica free %v after the kill (lease 1s)", time.Since(killed).Round(time.Millisecond))
}

// TestRealRedisClusterMode runs the scripts on a real Redis Cluster (one
// node owning every slot), where a script whose keys span slots fails with
// CROSSSLOT: the hash-tag rule (pins included) checked by Redis itself.
func TestRealRedisClusterMode(t *testing.T) {
	dir := t.TempDir()
	srv := redistest.Start(t, "--cluster-enabled", "yes", "--dir", dir, "--cluster-config-file", dir+"/nodes.conf")
	ctx := context.Background()
	admin := srv.Client()
	if err := admin.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", 0, 16383).Err(); err != nil {
		t.Fatalf("assigning slots: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, _ := admin.ClusterInfo(ctx).Result()
		if strings.Contains(info, "cluster_state:ok") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("cluster not ok")
		}
		time.Sleep(20 * time.Millisecond)
	}
	c, br, err := cluster.NewClient(config.Redis{Addrs: []string{srv.Addr(), srv.Addr()}, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cross := []string{cluster.TeamKey("sy:", "a", "tat"), cluster.TeamKey("sy:", "b", "tat")}
	if cluster.Slot(cross[0]) != cluster.Slot(cross[1]) {
		if err := c.Eval(ctx, "return redis.call('MGET', KEYS[1], KEYS[2])", cross).Err(); err == nil || !strings.Contains(err.Error(), "CROSSSLOT") {
			t.Fatalf("cross-slot script: err = %v, want CROSSSLOT", err)
		}
	}
	obs := &countObs{}
	store := telemetry.NewRedisAudit(c, "sy:", 100, telemetry.NewRing(10))
	r := NewRedis(c, br, Config{Prefix: "sy:", Timeout: time.Second}, nil, store, nil, obs)
	team := teamtest.Team("acme", teamtest.Limits{RPM: 5, TPM: 10000, Par: 3, USD: 10, Period: time.Hour})
	q := PinQuery{Session: "acme:id:1", TierAlias: "normal", Models: [2]string{"m", "strong"}}
	var begun []Begun
	for i := range 6 {
		b, err := r.Begin(ctx, &Request{RequestID: reqID(i), Team: team, Tokens: 100, Pins: q})
		if err != nil {
			t.Fatal(err)
		}
		if b.Decision.Allowed {
			begun = append(begun, b)
		}
	}
	if len(begun) != 3 {
		t.Fatalf("%d admitted, want max_parallel 3", len(begun))
	}
	for i := range begun {
		r.Finish(&begun[i], &Outcome{Served: true, Deployment: "d1", PromptTokens: 40, CompletionTokens: 10, CostUSD: 0.1,
			TierPin: "hard", TierTTL: time.Minute, DepModel: "m", DepPin: "d1", DepTTL: time.Minute,
			Audit: &telemetry.Entry{RequestID: "x", Team: "acme", Time: time.Unix(1, int64(i))}}) // a request's start, as the gateway sets it: three entries, not one sent three times
	}
	// usage by level is read by one script call a team on Cluster too:
	// its days' keys share its slot
	now := time.Now()
	zday := cluster.TeamKey("sy:", "zeta", "usage:"+dayString(dayOf(now)))
	if err := admin.HSet(ctx, zday, rowField(rowKey{model: "m", key: "k"})+"req", 4).Err(); err != nil {
		t.Fatal(err)
	}
	rep, err := r.UsageRows(ctx, UsageQuery{Teams: []string{"acme", "zeta"}, From: now.AddDate(0, 0, -6), To: now})
	if err != nil || !rep.Shared {
		t.Fatalf("usage rows on Cluster: shared %v, %v", rep.Shared, err)
	}
	found := false
	for _, row := range rep.Rows {
		found = found || (row.Team == "zeta" && row.Model == "m" && row.Key == "k" && row.Requests == 4)
	}
	if !found {
		t.Fatalf("usage rows on Cluster: %+v, want zeta's row of 4 requests", rep.Rows)
	}
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if n := obs.fallbacks.Load(); n != 0 {
		t.Fatalf("%d fallbacks: a script failed on Cluster", n)
	}
	if got, _ := admin.HGet(ctx, "sy:{team:acme}:budget", "usd").Float64(); math.Abs(got-0.3) > 1e-9 {
		t.Fatalf("spend %v, want 0.3", got)
	}
	if n := admin.ZCard(ctx, "sy:{team:acme}:par").Val(); n != 0 {
		t.Fatalf("%d slots left after release", n)
	}
	if v := admin.Get(ctx, "sy:{team:acme}:pd:acme:id:1|m").Val(); v != "d1" {
		t.Fatalf("deployment pin on Cluster = %q", v)
	}
	if es, _ := store.Lookup(ctx, "x"); len(es) != 3 {
		t.Fatalf("audit on Cluster: %d entries", len(es))
	}
}

// TestTATKeyTTL: the TAT key's expiry is the larger TAT rounded up to 10 s
// of Redis's clock, and a write whose rounded TAT is not past the one it
// read keeps the key's TTL (KEEPTTL) instead of setting it again: the
// expiry never falls before the moment both buckets are full, and steady
// traffic sets a TTL once per 10 s, not on every admission. On real Redis
// and on miniredis.
func TestTATKeyTTL(t *testing.T) {
	const probe = tatLua + `
if tonumber(ARGV[5]) > 0 then redis.call('PEXPIRE', KEYS[1], ARGV[5]) end
settat(KEYS[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[1]), tonumber(ARGV[4]))
return redis.call('PTTL', KEYS[1])
`
	const now = 1_700_000_003_000_000 // 7 s before a multiple of 10 s
	steps := []struct {
		name          string
		r, t, prev    int64
		preset, ttlMS int64 // a TTL set before the write (0: none); the TTL after it
	}{
		{"absent key: rounded up to the next 10 s", now + 1_000_000, 0, 0, 0, 7_001},
		{"same 10 s: the TTL is kept", now + 2_000_000, 0, now + 1_000_000, 60_000, 60_000},
		{"tpm part in the same 10 s: kept", now + 2_000_000, now + 6_999_999, now + 2_000_000, 60_000, 60_000},
		{"past the rounded TAT read: set again", now + 8_000_000, 0, now + 6_999_999, 60_000, 17_001},
		{"a refund moves it back: kept", now + 500_000, 0, now + 8_000_000, 17_001, 17_001},
		{"what was read is gone (prev 0): set", now + 500_000, 0, 0, 60_000, 7_001},
	}
	srv := redistest.Start(t)
	m := miniredis.RunT(t)
	for name, c := range map[string]*redis.Client{"redis-server": srv.Client(), "miniredis": redis.NewClient(&redis.Options{Addr: m.Addr()})} {
		for _, s := range steps {
			got, err := c.Eval(context.Background(), probe, []string{"sy:{team:ttl}:tat"}, now, s.r, s.t, s.prev, s.preset).Int64()
			if err != nil {
				t.Fatalf("%s, %s: %v", name, s.name, err)
			}
			// each TTL is set and read inside one script call: only
			// microseconds pass on real Redis
			if got > s.ttlMS || got < s.ttlMS-50 {
				t.Fatalf("%s, %s: PTTL %d ms, want %d", name, s.name, got, s.ttlMS)
			}
		}
	}
}

// TestTATRoundTrip: the two TATs in one key come back exactly (bit for
// bit), fractional microseconds included, where Lua's tostring would keep
// 14 digits: packed doubles on real Redis (16 bytes), '%.17g' text on
// miniredis (no struct library). On real Redis a key in the text form,
// written before a node was upgraded, is read as well (the TATs it holds,
// not a full bucket).
func TestTATRoundTrip(t *testing.T) {
	const probe = tatLua + `
local now = tonumber(ARGV[1])
local r = now + 60000000 / 7
local tt = now + 1 / 3 + 1000 * 60000000 / 6001
settat(KEYS[1], r, tt, now, 0)
local size = redis.call('STRLEN', KEYS[1])
local a, b = gettat(KEYS[1])
local ok = 0
if a == r and b == tt and redis.call('PTTL', KEYS[1]) > 0 then ok = 1 end
-- the text form, as a node before the packed form wrote it
redis.call('SET', KEYS[1], string.format('%.17g:%.17g', r, tt), 'PX', 60000)
a, b = gettat(KEYS[1])
local text = 0
if a == r and b == tt then text = 1 end
settat(KEYS[1], 0, now, now, tt) -- both full: deleted
return {ok, redis.call('EXISTS', KEYS[1]), size, text}
`
	srv := redistest.Start(t)
	m := miniredis.RunT(t)
	for _, c := range []struct {
		name string
		c    *redis.Client
		size int64 // the stored value's bytes
	}{{"redis-server", srv.Client(), 16}, {"miniredis", redis.NewClient(&redis.Options{Addr: m.Addr()}), 0}} {
		for _, now := range []int64{1_700_000_000_123_457, 1_799_999_999_999_999, 4_102_444_800_000_001} {
			got, err := c.c.Eval(context.Background(), probe, []string{"sy:{team:rt}:tat"}, now).Int64Slice()
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			if got[0] != 1 || got[1] != 0 || got[3] != 1 {
				t.Fatalf("%s, now %d: round trip ok=%d, exists after full=%d, text form read=%d", c.name, now, got[0], got[1], got[3])
			}
			if c.size > 0 && got[2] != c.size || c.size == 0 && got[2] < 33 {
				t.Fatalf("%s, now %d: the stored TATs take %d bytes, want %d (0: the text form, at least 33)", c.name, now, got[2], c.size)
			}
		}
	}
}

// TestTATWriteInPlace: a write that keeps the TTL of a key read as packed
// TATs overwrites its 16 bytes in place (SETRANGE: the value becomes a raw
// string, where a SET of 16 bytes makes an embedded one) and keeps the
// TTL; a key read in the text form is replaced whole, so no byte of the
// longer text is left behind. Every written TAT comes back exactly. On
// miniredis (no struct library) every write is the text form's SET.
func TestTATWriteInPlace(t *testing.T) {
	const probe = tatLua + `
local now = tonumber(ARGV[1])
local r = now + 60000000 / 7
settat(KEYS[1], r, 0, now, 0) -- absent: SET with a TTL
local pttl0 = redis.call('PTTL', KEYS[1])
local a, b, packed = gettat(KEYS[1])
local r2 = r + 1 / 3 -- the same 10 s: the TTL is kept
settat(KEYS[1], r2, 0, now, max(a, b), packed)
local a2 = gettat(KEYS[1])
local enc = redis.call('OBJECT', 'ENCODING', KEYS[1])
local kept = redis.call('PTTL', KEYS[1]) <= pttl0 and 1 or 0
-- the text form, as a node before the packed form wrote it
redis.call('SET', KEYS[1], string.format('%.17g:%.17g', r, r), 'PX', 60000)
local c, d, tpacked = gettat(KEYS[1])
settat(KEYS[1], r2, r2, now, max(c, d), tpacked)
local c2, d2 = gettat(KEYS[1])
local ok = 0
if a == r and a2 == r2 and c2 == r2 and d2 == r2 and redis.call('PTTL', KEYS[1]) > 50000 then ok = 1 end
return {ok, enc, packed and 1 or 0, tpacked and 1 or 0, redis.call('STRLEN', KEYS[1]), kept}
`
	srv := redistest.Start(t)
	m := miniredis.RunT(t)
	for _, c := range []struct {
		name    string
		c       *redis.Client
		enc     string // the encoding after the write that kept the TTL
		packed  int64  // gettat read packed TATs
		size    int64  // bytes after the text key's rewrite (0: text, at least 33)
		skipEnc bool   // miniredis has no OBJECT ENCODING
	}{
		{"redis-server", srv.Client(), "raw", 1, 16, false},
		{"miniredis", redis.NewClient(&redis.Options{Addr: m.Addr()}), "", 0, 0, true},
	} {
		src := probe
		if c.skipEnc {
			src = strings.Replace(src, "redis.call('OBJECT', 'ENCODING', KEYS[1])", "''", 1)
		}
		got, err := c.c.Eval(context.Background(), src, []string{"sy:{team:inplace}:tat"}, int64(1_700_000_003_000_000)).Slice()
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got[0] != int64(1) || got[5] != int64(1) {
			t.Fatalf("%s: TATs exact=%v, TTL kept=%v", c.name, got[0], got[5])
		}
		if !c.skipEnc && got[1] != c.enc {
			t.Fatalf("%s: encoding after the TTL-keeping write %v, want %s (raw: written in place)", c.name, got[1], c.enc)
		}
		if got[2] != c.packed || got[3] != int64(0) {
			t.Fatalf("%s: read as packed: %v, the text key %v; want %d and 0", c.name, got[2], got[3], c.packed)
		}
		if c.size > 0 && got[4] != c.size || c.size == 0 && got[4].(int64) < 33 {
			t.Fatalf("%s: the rewritten text key holds %v bytes, want %d (0: text)", c.name, got[4], c.size)
		}
	}
}
