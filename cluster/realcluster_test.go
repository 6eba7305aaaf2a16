package cluster

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"switchyard/config"
	"switchyard/internal/redistest"
)

// shardKeys finds, for each shard of the cluster, a few team keys whose slot
// that shard's master serves (by the shard's first slot range).
func shardKeys(t *testing.T, rc *redistest.Cluster) map[string][]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c := redis.NewClient(&redis.Options{Addr: rc.Addrs()[0]})
	defer c.Close()
	slots, err := c.ClusterSlots(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for i := 0; i < 10000; i++ {
		k := TeamKey("sy:", "team"+strconv.Itoa(i), "rpm")
		s := Slot(k)
		for _, r := range slots {
			if s >= r.Start && s <= r.End && len(out[r.Nodes[0].Addr]) < 3 {
				out[r.Nodes[0].Addr] = append(out[r.Nodes[0].Addr], k)
			}
		}
	}
	return out
}

// shardLoad drives calls on every shard's keys from a few goroutines, the
// way the edge layer uses Conn: Available first (local fallback when not),
// then one bounded call. It records, per shard, what happened when.
type shardLoad struct {
	mu   sync.Mutex
	logs map[string]*shardLog
}

type shardLog struct {
	ok, failed, local int
	lastFail          time.Time
	firstErr          error
	firstOKAfter      map[time.Time]time.Time // mark -> first success after it
	marks             []time.Time
	neverLocal        bool
}

func (l *shardLoad) mark(shard string, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	sl := l.logs[shard]
	sl.marks = append(sl.marks, at)
}

func (l *shardLoad) record(shard string, at time.Time, err error, local bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	sl := l.logs[shard]
	switch {
	case local:
		sl.local++
	case err != nil:
		sl.failed++
		sl.lastFail = at
		if sl.firstErr == nil {
			sl.firstErr = err
		}
	default:
		sl.ok++
		for _, m := range sl.marks {
			if _, seen := sl.firstOKAfter[m]; !seen && at.After(m) {
				sl.firstOKAfter[m] = at
			}
		}
	}
}

func (l *shardLoad) snapshot(shard string) shardLog {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := *l.logs[shard]
	s.firstOKAfter = map[time.Time]time.Time{}
	for k, v := range l.logs[shard].firstOKAfter {
		s.firstOKAfter[k] = v
	}
	return s
}

// run calls INCR on the keys of every shard until ctx ends.
func (l *shardLoad) run(ctx context.Context, conn *Conn, keys map[string][]string, workers int) *sync.WaitGroup {
	l.logs = map[string]*shardLog{}
	for sh := range keys {
		l.logs[sh] = &shardLog{firstOKAfter: map[time.Time]time.Time{}}
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; ctx.Err() == nil; i++ {
				for sh, ks := range keys {
					k := ks[i%len(ks)]
					if !conn.Available(k) {
						l.record(sh, time.Now(), nil, true)
						continue
					}
					cctx, cancel := context.WithTimeout(ctx, conn.timeout)
					err := conn.Client.Incr(cctx, k).Err()
					cancel()
					if ctx.Err() != nil {
						return
					}
					l.record(sh, time.Now(), err, false)
				}
				time.Sleep(time.Millisecond) // a steady load, not a spin: the machine is shared
			}
		}()
	}
	return &wg
}

// checkHealthy: every shard but hurt served calls, none failed, none went
// local, and its breaker never tripped (trips counted from before).
func (l *shardLoad) checkHealthy(t *testing.T, conn *Conn, keys map[string][]string, hurt string, before map[string]int64) {
	t.Helper()
	for sh, ks := range keys {
		if sh == hurt {
			continue
		}
		o := l.snapshot(sh)
		trips := conn.BreakerFor(ks[0]).Trips() - before[sh]
		if o.failed != 0 || o.local != 0 || trips != 0 || o.ok == 0 {
			t.Errorf("healthy shard %s: %d ok, %d failed (first: %v), %d local, breaker tripped %d times; want only ok", sh, o.ok, o.failed, o.firstErr, o.local, trips)
		}
	}
}

// TestRealCluster runs against a real Redis Cluster of 3 masters and 3
// replicas, one cluster shared by the steps (formation takes seconds):
// warm-up, a master SIGKILLed under load (its replica takes over within
// seconds of the promotion, other shards never notice), then a shard lost
// entirely (the other shards' breakers stay closed, its own does not flap).
func TestRealCluster(t *testing.T) {
	rc := redistest.StartCluster(t, 3)
	const workers = 4
	// A timeout well above production's 50ms: the whole suite shares two
	// cores under -race, and a healthy shard's call that misses the timeout
	// is a (correct) failure this test is not about. The dead nodes refuse
	// connections at once, so the timeout does not slow the failover.
	conn, err := Connect(config.Redis{Addrs: rc.Addrs(), Timeout: 250 * time.Millisecond, PoolSize: 8}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	keys := shardKeys(t, rc)
	if len(keys) != 3 {
		t.Fatalf("keys on %d shards, want 3", len(keys))
	}

	t.Run("warm", func(t *testing.T) {
		cc := conn.Client.(*redis.ClusterClient)
		// The client's first slot map can come from a node that has not yet
		// listed a freshly attached replica (seen on the loaded CI machine):
		// reload it, bounded, until it knows every node, then warm.
		for deadline := time.Now().Add(10 * time.Second); ; {
			var known atomic.Int32
			_ = cc.ForEachShard(ctx, func(context.Context, *redis.Client) error { known.Add(1); return nil })
			if known.Load() == 6 || time.Now().After(deadline) {
				break
			}
			cc.ReloadState(ctx)
			time.Sleep(50 * time.Millisecond)
		}
		if err := conn.Warm(ctx); err != nil {
			t.Fatal(err)
		}
		var nodes atomic.Int32
		_ = cc.ForEachShard(ctx, func(ctx context.Context, c *redis.Client) error {
			nodes.Add(1)
			if st := c.PoolStats(); st.TotalConns < 8 {
				t.Errorf("%s: %d connections open after Warm, want 8", c.Options().Addr, st.TotalConns)
			}
			return nil
		})
		if nodes.Load() != 6 {
			t.Fatalf("warmed %d nodes, want 6 (masters and replicas)", nodes.Load())
		}
		for sh, ks := range keys {
			if !conn.Available(ks[0]) {
				t.Fatalf("shard %s unavailable with every node up", sh)
			}
		}
	})

	// The shard whose master is killed first, and the one lost entirely later.
	shards := rc.Shards()
	failover, lost := shards[0], shards[1]
	tripsBefore := func() map[string]int64 {
		out := map[string]int64{}
		for sh, ks := range keys {
			out[sh] = conn.BreakerFor(ks[0]).Trips()
		}
		return out
	}

	t.Run("master SIGKILL: promoted replica takes over, other shards untouched", func(t *testing.T) {
		before := tripsBefore()
		lctx, stop := context.WithCancel(ctx)
		var load shardLoad
		wg := load.run(lctx, conn, keys, workers)
		defer func() { stop(); wg.Wait() }()
		time.Sleep(300 * time.Millisecond) // load established on every shard

		rc.Kill(failover.Master)
		killedAt := time.Now()
		promotedAt := rc.WaitPromoted(failover.Replicas[0], 20*time.Second)
		load.mark(failover.Master, promotedAt)
		deadline := promotedAt.Add(10 * time.Second)
		for {
			if _, ok := load.snapshot(failover.Master).firstOKAfter[promotedAt]; ok || time.Now().After(deadline) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(500 * time.Millisecond) // a little load after the takeover
		stop()
		wg.Wait()

		got := load.snapshot(failover.Master)
		took, ok := got.firstOKAfter[promotedAt]
		if !ok {
			t.Fatalf("killed shard's keys not served within 10s of the promotion (%+v)", got)
		}
		t.Logf("master killed; replica promoted %v later; its keys shared again %v after the promotion; %d calls failed, %d went local, %d ok",
			promotedAt.Sub(killedAt).Round(time.Millisecond), took.Sub(promotedAt).Round(time.Millisecond), got.failed, got.local, got.ok)
		if took.Sub(promotedAt) > 10*time.Second {
			t.Errorf("takeover %v after the promotion, want within 10s", took.Sub(promotedAt))
		}
		// The only failed calls are those in flight before the breaker
		// opened: each worker's calls up to the threshold. Nothing fails
		// after the takeover.
		if bound := DefaultThreshold + 2*workers; got.failed > bound {
			t.Errorf("%d calls failed on the killed shard, want at most %d (then local until the takeover)", got.failed, bound)
		}
		if !got.lastFail.IsZero() && got.lastFail.After(took) {
			t.Errorf("a call failed %v after the takeover", got.lastFail.Sub(took))
		}
		load.checkHealthy(t, conn, keys, failover.Master, before)
		// The promoted replica now serves the killed shard's keys.
		keys[failover.Replicas[0]] = keys[failover.Master]
		delete(keys, failover.Master)
	})

	t.Run("one shard lost: other shards stay closed, no flapping", func(t *testing.T) {
		before := tripsBefore()
		lctx, stop := context.WithCancel(ctx)
		var load shardLoad
		wg := load.run(lctx, conn, keys, workers)
		defer func() { stop(); wg.Wait() }()
		time.Sleep(200 * time.Millisecond)
		rc.Kill(lost.Master)
		for _, r := range lost.Replicas {
			rc.Kill(r)
		}
		time.Sleep(time.Second + 2*redistest.NodeTimeout) // past the nodes' failure detection, three cool periods
		stop()
		wg.Wait()

		gone := load.snapshot(lost.Master)
		br := conn.BreakerFor(keys[lost.Master][0])
		t.Logf("lost shard: %d failed, %d local, %d ok, breaker trips %d", gone.failed, gone.local, gone.ok, br.Trips()-before[lost.Master])
		if br.Up() || br.Trips()-before[lost.Master] != 1 {
			t.Errorf("lost shard's breaker: up %v, %d trips; want open after exactly one trip", br.Up(), br.Trips()-before[lost.Master])
		}
		if bound := DefaultThreshold + 2*workers; gone.failed > bound {
			t.Errorf("%d calls failed on the lost shard, want at most %d", gone.failed, bound)
		}
		load.checkHealthy(t, conn, keys, lost.Master, before)
		if conn.Up() {
			t.Error("summary up with a shard lost")
		}
	})
}

const sigStop, sigCont = syscall.SIGSTOP, syscall.SIGCONT

// TestPoolWaitDoesNotOpen is the burst defect on a real server: with every
// pooled connection busy, calls that time out waiting for one leave the
// breaker closed.
func TestPoolWaitDoesNotOpen(t *testing.T) {
	srv := redistest.Start(t)
	conn, err := Connect(config.Redis{URL: srv.URL(), Timeout: 50 * time.Millisecond, PoolSize: 2}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx := context.Background()
	held := []*redis.Conn{}
	for range 2 { // hold the whole pool
		c := conn.Client.(*redis.Client).Conn()
		if err := c.Ping(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	var waits int
	for range 3 * DefaultThreshold {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
		err := conn.Client.Ping(cctx).Err()
		cancel()
		if errors.Is(err, redis.ErrPoolTimeout) || errors.Is(err, context.DeadlineExceeded) {
			waits++
		}
	}
	if waits == 0 {
		t.Fatal("no call waited for the pool: the test does not exercise it")
	}
	if !conn.Up() {
		t.Fatalf("breaker opened after %d pool waits", waits)
	}
	for _, c := range held {
		_ = c.Close()
	}
	// A hung Redis, by contrast, opens it.
	srv.Signal(sigStop)
	defer srv.Signal(sigCont)
	for range DefaultThreshold {
		_ = conn.Client.Ping(ctx).Err()
	}
	if conn.Up() {
		t.Fatal("breaker still closed with Redis hung")
	}
}

// TestWarmOpensThePool: after Warm a burst as wide as the pool finds every
// connection open and handshaken (no dial on the request path: the pool
// records no miss). A fresh node's pool used to open them inside its first
// burst, within the 50 ms timeout, and over-admitted when a dial missed it.
func TestWarmOpensThePool(t *testing.T) {
	srv := redistest.Start(t)
	const pool = 16
	burst := func(c *redis.Client) uint32 {
		before := c.PoolStats().Misses
		var wg sync.WaitGroup
		for range pool {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				_ = c.Eval(ctx, "redis.call('INCR', KEYS[1]); return 1", []string{"k"}).Err()
			}()
		}
		wg.Wait()
		return c.PoolStats().Misses - before
	}
	conn, err := Connect(config.Redis{URL: srv.URL(), Timeout: time.Second, PoolSize: pool}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := conn.Client.(*redis.Client)
	if err := conn.Warm(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := c.PoolStats(); st.TotalConns < pool || st.IdleConns < pool {
		t.Fatalf("after Warm: %d open, %d idle; want %d", st.TotalConns, st.IdleConns, pool)
	}
	if m := burst(c); m != 0 {
		t.Errorf("warm pool: the burst dialed %d connections, want 0", m)
	}
}
