package ratelimit

import (
	"context"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"switchyard/cluster"
	"switchyard/config"
)

// replica is one gateway replica's limiter on a real Redis.
type replica struct {
	r  *Redis
	br *cluster.Breaker
	ob *countObs

	mu      sync.Mutex
	changes []bool // breaker OnChange calls
}

func newReplica(t *testing.T, url string, timeout, cool time.Duration, fallback *Local) *replica {
	t.Helper()
	rp := &replica{ob: &countObs{}, br: cluster.NewBreaker(3, cool, nil)}
	rp.br.OnChange(func(up bool) {
		rp.mu.Lock()
		rp.changes = append(rp.changes, up)
		rp.mu.Unlock()
	})
	c, err := cluster.NewClientWithBreaker(config.Redis{URL: url, Timeout: timeout}, rp.br)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	rp.r = NewRedis(c, rp.br, "sy:", timeout, fallback, rp.ob)
	rp.r.SetRetryInterval(10 * time.Millisecond)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = rp.r.Close(ctx)
	})
	return rp
}

func (rp *replica) changeLog() []bool {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	return append([]bool(nil), rp.changes...)
}

// TestClusterExact: three replicas share one real Redis; a burst of 200
// concurrent admissions spread over them admits exactly min(burst, limit)
// for each dimension. The timeout is generous here: this test is about
// exactness, and a fallback (which it asserts never happens) would blur it.
func TestClusterExact(t *testing.T) {
	srv := startRedisServer(t)
	var reps []*replica
	var lims []Limiter
	for range 3 {
		rp := newReplica(t, srv.URL(), 2*time.Second, time.Second, NewLocal(time.Now, 3))
		reps = append(reps, rp)
		lims = append(lims, rp.r)
	}
	for _, tc := range []struct {
		name   string
		team   limitsOf
		tokens int64
		want   int
		kind   string
	}{
		{"rpm 60", limitsOf{rpm: 60}, 0, 60, KindRPM},
		{"max_parallel 10", limitsOf{par: 10}, 0, 10, KindParallel},
		{"tpm 6000 by 100", limitsOf{tpm: 6000}, 100, 60, KindTPM},
		{"all at once", limitsOf{rpm: 50, tpm: 100000, par: 40}, 100, 40, KindParallel},
	} {
		t.Run(tc.name, func(t *testing.T) {
			team := newTeam("exact-"+tc.name, tc.team)
			ds := burst(t, lims, func(i int) Admission {
				return Admission{RequestID: reqID(i), Team: team, Tokens: tc.tokens}
			}, 200)
			if n := countAllowed(ds); n != tc.want {
				t.Fatalf("%d of 200 admitted, want exactly %d", n, tc.want)
			}
			for _, d := range ds {
				if d.Allowed && d.Ticket.Local {
					t.Fatal("a ticket was granted locally")
				}
				if !d.Allowed && d.Kind != tc.kind {
					t.Fatalf("rejected as %q, want %q", d.Kind, tc.kind)
				}
			}
		})
	}
	for i, rp := range reps {
		if n := rp.ob.fallbacks.Load(); n != 0 {
			t.Fatalf("replica %d fell back %d times", i, n)
		}
	}
}

// TestFaultKillRestart: Redis is killed in the middle of a load over three
// replicas. No Admit outlives 10×timeout (each runs under that deadline and
// must return before it passes); the replicas fall back to local limits of
// limit/expected_replicas; reconciles made while down are buffered. Redis is
// restarted (empty) on the same port: the breakers probe and close, the
// buffered spend is replayed into the new Redis, and the replicas share
// state again.
func TestFaultKillRestart(t *testing.T) {
	srv := startRedisServer(t)
	const timeout = 50 * time.Millisecond
	frozen := newFakeClock() // the fallback limiters' clock: no refill during the test
	var reps []*replica
	for range 3 {
		reps = append(reps, newReplica(t, srv.URL(), timeout, 100*time.Millisecond, NewLocal(frozen.Now, 3)))
	}
	loadTeam := newTeam("load", limitsOf{rpm: 600, usd: 100, period: time.Hour}) // 200 per replica when down
	tokTeam := newTeam("tok", limitsOf{tpm: 60000})

	// Up: tickets granted by Redis, to be reconciled while it is down.
	var redisTickets []Ticket
	for _, rp := range reps {
		d, _ := rp.r.Admit(context.Background(), Admission{RequestID: "up", Team: tokTeam, Tokens: 100})
		if !d.Allowed || d.Ticket.Local {
			t.Fatalf("with Redis up: %+v", d)
		}
		redisTickets = append(redisTickets, d.Ticket)
	}

	// Load, with Redis killed by whichever worker completes the 60th admission.
	const workers, perWorker = 4, 100
	var (
		done         atomic.Int64
		late         atomic.Int64
		maxTook      atomic.Int64
		localAllowed [3]atomic.Int64
		localTickets [3][]Ticket
		ticketMu     sync.Mutex
		killOnce     sync.Once
		wg           sync.WaitGroup
	)
	for ri, rp := range reps {
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range perWorker {
					// 10×timeout: far below go-redis's unbounded defaults (a
					// hung Redis held a call 5 s, a refused port 1.7 s), with
					// room for a loaded CI machine running packages in parallel
					ctx, cancel := context.WithTimeout(context.Background(), 10*timeout)
					start := time.Now()
					d, err := rp.r.Admit(ctx, Admission{RequestID: reqID(i), Team: loadTeam})
					took := time.Since(start)
					if ctx.Err() != nil {
						late.Add(1)
					}
					cancel()
					if err != nil {
						t.Error(err)
						return
					}
					for {
						m := maxTook.Load()
						if int64(took) <= m || maxTook.CompareAndSwap(m, int64(took)) {
							break
						}
					}
					if d.Allowed && d.Ticket.Local {
						localAllowed[ri].Add(1)
						ticketMu.Lock()
						localTickets[ri] = append(localTickets[ri], d.Ticket)
						ticketMu.Unlock()
					}
					if done.Add(1) == 60 {
						killOnce.Do(srv.Kill)
					}
				}
			}()
		}
	}
	wg.Wait()
	t.Logf("slowest Admit during the kill: %v (timeout %v)", time.Duration(maxTook.Load()), timeout)
	if n := late.Load(); n > 0 {
		t.Fatalf("%d Admits returned after 10×timeout", n)
	}
	for ri, rp := range reps {
		if n := localAllowed[ri].Load(); n != 200 {
			t.Errorf("replica %d admitted %d locally, want rpm 600 / 3 replicas = 200", ri, n)
		}
		if rp.ob.fallbacks.Load() == 0 || rp.br.Up() {
			t.Errorf("replica %d: fallbacks %d, breaker up %v", ri, rp.ob.fallbacks.Load(), rp.br.Up())
		}
	}

	// Reconciles while down: spend of local tickets, a TPM charge of Redis tickets.
	var wantUSD float64
	for ri, rp := range reps {
		for _, tk := range localTickets[ri][:10] {
			rp.r.Reconcile(tk, 0, 0.01)
			rp.r.Release(tk)
			wantUSD += 0.01
		}
		rp.r.Reconcile(redisTickets[ri], 100+6000, 0) // 6000 tokens over the estimate
	}

	srv.Restart() // empty: --save ""
	c := srv.Client()
	waitUntil(t, 10*time.Second, "every breaker to close and the spend to be replayed", func() bool {
		for _, rp := range reps {
			rp.r.fl.signal()
			if !rp.br.Up() {
				return false
			}
		}
		got, _ := strconv.ParseFloat(c.HGet(context.Background(), "sy:{team:load}:budget", "usd").Val(), 64)
		return math.Abs(got-wantUSD) < 1e-9
	})
	for ri, rp := range reps {
		// Down, up; under the race detector a cold pool's first calls may
		// time out and flap it once more, but it alternates and ends up.
		got := rp.changeLog()
		for i, up := range got {
			if up != (i%2 == 1) {
				t.Errorf("replica %d OnChange = %v, want down/up alternating", ri, got)
			}
		}
		if len(got) < 2 || !got[len(got)-1] {
			t.Errorf("replica %d OnChange = %v, want it to end up", ri, got)
		}
		settle(t, rp.r)
		if n := rp.ob.dropped.Load(); n != 0 {
			t.Errorf("replica %d dropped %d updates", ri, n)
		}
	}
	// Three charges of 6000 tokens on a 60000 tpm bucket: 18 s owed.
	tats, err := c.Get(context.Background(), "sy:{team:tok}:tat").Result()
	if err != nil {
		t.Fatalf("replayed TPM charge: %v", err)
	}
	_, ttat, _ := strings.Cut(tats, ":") // "rtat:ttat"
	tat, err := strconv.ParseFloat(ttat, 64)
	if err != nil {
		t.Fatalf("TPM TAT in %q: %v", tats, err)
	}
	if owed := time.Duration(tat*1e3) - time.Duration(time.Now().UnixMicro()*1e3); owed < 15*time.Second || owed > 19*time.Second {
		t.Fatalf("TPM debt after replay %v, want ~18s", owed)
	}

	// Shared state again: one limit across the three replicas, taken in
	// turns (the concurrent case is TestClusterExact; here a burst on cold
	// pools under -race could time out and blur the count with fallbacks).
	after := newTeam("after", limitsOf{rpm: 30})
	n := 0
	for i := range 100 {
		d, _ := reps[i%3].r.Admit(context.Background(), Admission{RequestID: reqID(i), Team: after})
		if d.Allowed {
			n++
			if d.Ticket.Local {
				t.Fatal("after recovery a ticket was still granted locally")
			}
		}
	}
	if n != 30 {
		t.Fatalf("after recovery: %d of 100 admitted, want 30", n)
	}
}

// TestRedisClusterMode runs the scripts on a real Redis Cluster (one node
// owning every slot), where a script whose keys span slots fails with
// CROSSSLOT: the hash-tag rule checked by Redis itself, not by a model of it.
func TestRedisClusterMode(t *testing.T) {
	dir := t.TempDir()
	srv := startRedisServer(t, "--cluster-enabled", "yes", "--dir", dir, "--cluster-config-file", dir+"/nodes.conf")
	ctx := context.Background()
	admin := srv.Client()
	if err := admin.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", 0, 16383).Err(); err != nil {
		t.Fatalf("assigning slots: %v", err)
	}
	waitUntil(t, 10*time.Second, "the cluster to be ok", func() bool {
		info, _ := admin.ClusterInfo(ctx).Result()
		return strings.Contains(info, "cluster_state:ok")
	})

	// Two addresses select the Cluster client (both are the one node).
	c, br, err := cluster.NewClient(config.Redis{Addrs: []string{srv.Addr(), srv.Addr()}, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Negative control: keys of two teams in one script are refused.
	cross := []string{cluster.TeamKey("sy:", "a", "rpm"), cluster.TeamKey("sy:", "b", "rpm")}
	if cluster.Slot(cross[0]) != cluster.Slot(cross[1]) {
		err := c.Eval(ctx, "return redis.call('MGET', KEYS[1], KEYS[2])", cross).Err()
		if err == nil || !strings.Contains(err.Error(), "CROSSSLOT") {
			t.Fatalf("cross-slot script: err = %v, want CROSSSLOT", err)
		}
	}

	obs := &countObs{}
	r := NewRedis(c, br, "sy:", time.Second, NewLocal(time.Now, 1), obs)
	team := newTeam("acme", limitsOf{rpm: 5, tpm: 10000, par: 3, usd: 10, period: time.Hour})
	var tickets []Ticket
	for i := range 6 {
		d, err := r.Admit(ctx, Admission{RequestID: reqID(i), Team: team, Tokens: 100})
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			tickets = append(tickets, d.Ticket)
		}
	}
	if len(tickets) != 3 {
		t.Fatalf("%d admitted, want max_parallel 3", len(tickets))
	}
	for _, tk := range tickets {
		r.Reconcile(tk, 50, 0.1)
		r.Release(tk)
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

	u := newRedisUsage(c, "sy:", time.Second, 1, nil, obs)
	u.Record("d1", 10)
	u.Record("d2", 20)
	u.flush(ctx)
	u.refresh(ctx)
	if rpm, tpm := u.Usage("d2"); rpm != 1 || tpm != 20 {
		t.Fatalf("usage on Cluster: %d/%d", rpm, tpm)
	}
}

// TestTATRoundTrip: the two TATs in one string key come back exactly (bit
// for bit) from string.format('%.17g'), fractional microseconds included,
// where Lua's tostring would keep 14 digits; on real Redis and on miniredis.
func TestTATRoundTrip(t *testing.T) {
	const probe = tatLua + `
local now = tonumber(ARGV[1])
local r = now + 60000000 / 7
local tt = now + 1 / 3 + 1000 * 60000000 / 6001
settat(KEYS[1], r, tt, now)
local a, b = gettat(KEYS[1])
local ok = 0
if a == r and b == tt and redis.call('PTTL', KEYS[1]) > 0 then ok = 1 end
settat(KEYS[1], 0, now, now) -- both full: deleted
return {ok, redis.call('EXISTS', KEYS[1])}
`
	srv := startRedisServer(t)
	m := miniredis.RunT(t)
	for name, c := range map[string]*redis.Client{"redis-server": srv.Client(), "miniredis": redis.NewClient(&redis.Options{Addr: m.Addr()})} {
		for _, now := range []int64{1_700_000_000_123_457, 1_799_999_999_999_999, 4_102_444_800_000_001} {
			got, err := c.Eval(context.Background(), probe, []string{"sy:{team:rt}:tat"}, now).Int64Slice()
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if got[0] != 1 || got[1] != 0 {
				t.Fatalf("%s, now %d: round trip ok=%d, exists after full=%d", name, now, got[0], got[1])
			}
		}
	}
}
