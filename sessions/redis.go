package sessions

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisClient is the part of go-redis the shared store uses.
type RedisClient interface {
	Get(ctx context.Context, key string) *redis.StringCmd
	Pipelined(ctx context.Context, fn func(redis.Pipeliner) error) ([]redis.Cmder, error)
}

// Observer hears about fallbacks and writes that could not be kept.
type Observer interface {
	OnFallback(component string)
	OnDropped(n int)
}

// Redis is the shared Store (SPEC 8, 9): pins live in Redis with their TTLs
// so every replica sees them. Reads are bounded by the request-path
// timeout and fall back to the node-local store; writes go to the local
// store at once and to Redis asynchronously, coalesced per key and written
// in pipelined batches by one goroutine. A write that fails stays pending
// and is retried, so a pin set while Redis is down reaches Redis when it
// returns. Pending writes are bounded (maxPending keys); past that the
// oldest are dropped and counted.
type Redis struct {
	// Immutable after NewRedis.
	c          RedisClient
	prefix     string
	timeout    time.Duration
	local      *Local
	obs        Observer
	maxPending int
	wake       chan struct{}
	stop       chan struct{}
	done       chan struct{}

	mu       sync.Mutex
	pending  map[string]pendingSet // guarded by mu; Redis key -> latest write
	flushing map[string]pendingSet // guarded by mu; the batch being written now
}

type pendingSet struct {
	value string
	ttl   time.Duration
	at    time.Time
	// keepHigher makes the write escalate-only in Redis: a tier pin "easy"
	// never overwrites a "hard" that another replica wrote meanwhile; it
	// only refreshes the TTL of whatever is there (SPEC 4).
	keepHigher bool
}

// NewRedis returns a shared store writing under prefix (e.g. "switchyard:").
func NewRedis(c RedisClient, prefix string, timeout time.Duration, local *Local, obs Observer) *Redis {
	r := &Redis{
		c: c, prefix: prefix + "pin:", timeout: timeout, local: local, obs: obs, maxPending: 200_000,
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
		pending: map[string]pendingSet{},
	}
	go r.run()
	return r
}

func (r *Redis) key(k kind, key string) string {
	if k == kindTier {
		return r.prefix + "t:" + key
	}
	return r.prefix + "d:" + key
}

// GetTier implements Store.
func (r *Redis) GetTier(ctx context.Context, key string) (string, bool, error) {
	return r.get(ctx, kindTier, key)
}

// GetDeployment implements Store.
func (r *Redis) GetDeployment(ctx context.Context, key string) (string, bool, error) {
	return r.get(ctx, kindDeployment, key)
}

// SetTier implements Store.
func (r *Redis) SetTier(ctx context.Context, key, tier string, ttl time.Duration) error {
	_ = r.local.SetTier(ctx, key, tier, ttl)
	r.enqueue(r.key(kindTier, key), tier, ttl, tier == "easy")
	return nil
}

// SetDeployment implements Store.
func (r *Redis) SetDeployment(ctx context.Context, key, id string, ttl time.Duration) error {
	_ = r.local.SetDeployment(ctx, key, id, ttl)
	r.enqueue(r.key(kindDeployment, key), id, ttl, false)
	return nil
}

func (r *Redis) get(ctx context.Context, k kind, key string) (string, bool, error) {
	rk := r.key(k, key)
	r.mu.Lock()
	p, ok := r.pending[rk]
	if !ok {
		p, ok = r.flushing[rk]
	}
	r.mu.Unlock()
	if ok { // read your own writes before they reach Redis
		return p.value, p.ttl > 0, nil
	}
	cctx, cancel := context.WithTimeout(ctx, r.timeout)
	v, err := r.c.Get(cctx, rk).Result()
	cancel()
	switch {
	case err == nil:
		return v, true, nil
	case errors.Is(err, redis.Nil):
		return "", false, nil
	}
	r.obs.OnFallback("sessions")
	if k == kindTier {
		return r.local.GetTier(ctx, key)
	}
	return r.local.GetDeployment(ctx, key)
}

func (r *Redis) enqueue(rk, value string, ttl time.Duration, keepHigher bool) {
	r.mu.Lock()
	r.pending[rk] = pendingSet{value: value, ttl: ttl, at: time.Now(), keepHigher: keepHigher}
	if len(r.pending) > r.maxPending {
		r.dropOldestLocked(len(r.pending) - r.maxPending)
	}
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

func (r *Redis) dropOldestLocked(n int) {
	// rare: only when Redis has been down long enough to pile up maxPending
	// distinct sessions; an O(len) scan is acceptable there
	for i := 0; i < n; i++ {
		var oldK string
		var oldT time.Time
		for k, p := range r.pending {
			if oldK == "" || p.at.Before(oldT) {
				oldK, oldT = k, p.at
			}
		}
		delete(r.pending, oldK)
	}
	r.obs.OnDropped(n)
}

// run is the single writer: it drains pending writes in pipelined batches.
func (r *Redis) run() {
	defer close(r.done)
	backoff := 10 * time.Millisecond
	for {
		select {
		case <-r.wake:
			select { // linger briefly: one pipeline carries many pins under load
			case <-time.After(5 * time.Millisecond):
			case <-r.stop:
			}
		case <-r.stop:
			return
		case <-time.After(backoff):
		}
		if r.flush(context.Background()) {
			backoff = 10 * time.Millisecond
		} else {
			backoff = min(backoff*2, time.Second)
		}
	}
}

// flush writes everything pending; on failure the batch is put back
// (unless a newer write for the same key arrived meanwhile).
func (r *Redis) flush(ctx context.Context) bool {
	r.mu.Lock()
	if len(r.pending) == 0 {
		r.mu.Unlock()
		return true
	}
	batch := r.pending
	r.pending = make(map[string]pendingSet, len(batch))
	r.flushing = batch
	r.mu.Unlock()
	cctx, cancel := context.WithTimeout(ctx, max(4*r.timeout, 250*time.Millisecond))
	_, err := r.c.Pipelined(cctx, func(p redis.Pipeliner) error {
		for k, v := range batch {
			switch {
			case v.ttl <= 0:
				p.Del(cctx, k)
			case v.keepHigher:
				p.SetNX(cctx, k, v.value, v.ttl)
				p.PExpire(cctx, k, v.ttl)
			default:
				p.Set(cctx, k, v.value, v.ttl)
			}
		}
		return nil
	})
	cancel()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.flushing = nil
	if err == nil {
		return true
	}
	for k, v := range batch {
		if _, newer := r.pending[k]; !newer {
			r.pending[k] = v
		}
	}
	return false
}

// Close flushes pending writes within ctx and stops the writer.
func (r *Redis) Close(ctx context.Context) error {
	close(r.stop)
	<-r.done
	for {
		if r.flush(ctx) {
			return nil
		}
		select {
		case <-ctx.Done():
			r.mu.Lock()
			n := len(r.pending)
			r.mu.Unlock()
			r.obs.OnDropped(n)
			return errors.New("sessions: pins still pending at shutdown: Redis unreachable")
		case <-time.After(50 * time.Millisecond):
		}
	}
}

var _ Store = (*Redis)(nil)

// Lookup reads a pin whose Redis read was queued in a caller's pipeline.
type Lookup func() (value string, ok bool)

// QueueTier queues the read of a tier pin in p (the caller's pipeline, which
// also carries the edge-limit script: one round trip, SPEC 9) and returns
// how to read it once p has run.
func (r *Redis) QueueTier(ctx context.Context, p redis.Pipeliner, key string) Lookup {
	return r.queue(ctx, p, kindTier, key)
}

// QueueDeployment is QueueTier for a deployment pin.
func (r *Redis) QueueDeployment(ctx context.Context, p redis.Pipeliner, key string) Lookup {
	return r.queue(ctx, p, kindDeployment, key)
}

func (r *Redis) queue(ctx context.Context, p redis.Pipeliner, k kind, key string) Lookup {
	rk := r.key(k, key)
	r.mu.Lock()
	pv, pending := r.pending[rk]
	if !pending {
		pv, pending = r.flushing[rk]
	}
	r.mu.Unlock()
	if pending { // read your own writes: no need to ask Redis
		return func() (string, bool) { return pv.value, pv.ttl > 0 }
	}
	cmd := p.Get(ctx, rk)
	return func() (string, bool) {
		v, err := cmd.Result()
		switch {
		case err == nil:
			return v, true
		case errors.Is(err, redis.Nil):
			return "", false
		}
		r.obs.OnFallback("sessions")
		var ok bool
		if k == kindTier {
			v, ok, _ = r.local.GetTier(ctx, key)
		} else {
			v, ok, _ = r.local.GetDeployment(ctx, key)
		}
		return v, ok
	}
}
