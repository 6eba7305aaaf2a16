package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Warm opens the pool's connections before the node reports ready: on every
// node of a Cluster (masters and replicas, so a promoted replica is warm
// too), or on the one server, redis.pool_size connections each, every one
// dialed and handshaken (a connection go-redis opens in the background is
// only dialed: its HELLO/AUTH would still be paid by the first request).
//
// Without it a freshly started node opened its connections inside the first
// burst, each dial and handshake inside the 50 ms redis.timeout; on a loaded
// machine some missed it and those admissions were decided locally on top
// of the shared ones (21-26 admitted at rpm 20). Warm waits at most until
// ctx ends. Its error names the first node that failed; the node may serve
// anyway (SPEC 9: a Redis down at start means local fallback, not a failed
// start), and the connections stay open from then on; a lost one is
// re-opened by the next call that needs it.
func (c *Conn) Warm(ctx context.Context) error {
	switch cl := c.Client.(type) {
	case *redis.ClusterClient:
		var mu sync.Mutex
		var errs []error
		err := cl.ForEachShard(ctx, func(ctx context.Context, nc *redis.Client) error {
			if err := warmClient(ctx, nc, c.poolSize); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("cluster: warming the pools: loading the slot map: %w", err)
		}
		return errors.Join(errs...)
	case *redis.Client:
		return warmClient(ctx, cl, c.poolSize)
	}
	return nil
}

// warmClient holds n connections of c at once (so they are n distinct
// connections), each answering a PING, then returns them to the pool.
func warmClient(ctx context.Context, c *redis.Client, n int) error {
	conns := make([]*redis.Conn, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8) // dial a few at a time: the machine is shared
	for i := range conns {
		conns[i] = c.Conn()
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			errs[i] = conns[i].Ping(ctx).Err()
		}()
	}
	wg.Wait()
	for _, cn := range conns {
		_ = cn.Close()
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cluster: warming %d connections to %s: %w", n, c.Options().Addr, firstErr(errs))
	}
	return nil
}

func firstErr(errs []error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}
