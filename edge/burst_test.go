package edge

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"switchyard/cluster"
	"switchyard/config"
	"switchyard/internal/redistest"
	"switchyard/internal/teamtest"
)

// TestBurstLargerThanPool: 3,000 concurrent admissions on one node, with the
// production redis.timeout (50ms) and client (cluster.Connect, warmed pool
// of 64): the breaker stays closed. Before issue 16 the pool waits of such a
// burst were counted by the breaker (ErrPoolTimeout, and socket timeouts of
// calls whose deadline the queue had eaten) and it opened, sending every
// later request local. Calls that wait longer than half the timeout for a
// connection still go local one by one (SPEC 9: never wait longer), so this
// does not assert exactly rpm 100 admitted: on this machine 44-133 were (the
// figure is reported as missed; it needs admissions coalesced per team).
func TestBurstLargerThanPool(t *testing.T) {
	srv := redistest.Start(t)
	conn, err := cluster.Connect(config.Redis{URL: srv.URL(), Timeout: cluster.DefaultTimeout}, cluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := conn.Warm(ctx); err != nil {
		t.Fatal(err)
	}
	obs := &countObs{}
	r := newRedis(conn.Client, conn, Config{Prefix: "sy:", Timeout: cluster.DefaultTimeout, Divisor: 3}, nil, nil, nil, obs)
	team := teamtest.Team("burst", teamtest.Limits{RPM: 100})
	const n = 3000
	var admitted atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			b, err := r.Begin(ctx, &Request{RequestID: "b", Team: team})
			if err == nil && b.Decision.Allowed {
				admitted.Add(1)
			}
		}()
	}
	close(start)
	wg.Wait()
	t.Logf("%d concurrent admissions, pool %d: %d admitted, %d decided locally, breaker up %v",
		n, cluster.DefaultPoolSize(), admitted.Load(), obs.fallbacks.Load(), conn.Up())
	if !conn.Up() {
		t.Error("the burst opened the breaker")
	}
}
