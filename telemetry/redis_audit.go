package telemetry

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisAudit keeps audit entries in a bounded Redis stream (SPEC 12.2),
// readable from any replica: each entry is appended to the stream (capped
// at maxEntries, approximately; one command per request). A lookup by
// request id reads this node's ring first and otherwise walks the stream
// from its newest end, a page at a time: admin lookups are rare, requests
// are not, so the cost sits on the lookup. Entries are written
// asynchronously in pipelined batches; the
// buffer is bounded, and a full buffer makes Record wait briefly
// (backpressure) before it drops and counts. The local ring keeps every
// entry too, so this node answers even while Redis is down.
type RedisAudit struct {
	c          redis.UniversalClient
	stream     string
	maxEntries int64
	ttl        time.Duration
	local      *Ring
	dropped    func(n int)

	mu    sync.Mutex
	queue []*Entry // guarded by mu
	cap   int
	wake  chan struct{}
	stop  chan struct{}
	done  chan struct{}

	expired time.Time // writer goroutine only: when the stream's TTL was last refreshed
}

// NewRedisAudit returns the shared audit log under prefix.
func NewRedisAudit(c redis.UniversalClient, prefix string, maxEntries int, local *Ring, dropped func(int)) *RedisAudit {
	a := &RedisAudit{
		c: c, stream: prefix + "{audit}:stream", maxEntries: int64(maxEntries),
		ttl: 24 * time.Hour, local: local, dropped: dropped, cap: 50_000,
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
	}
	go a.run()
	return a
}

// Record implements AuditLog.
func (a *RedisAudit) Record(e *Entry) {
	a.local.Record(e)
	a.mu.Lock()
	if len(a.queue) >= a.cap {
		// backpressure: wait (bounded) for the writer to make room
		deadline := time.Now().Add(200 * time.Millisecond)
		for len(a.queue) >= a.cap && time.Now().Before(deadline) {
			a.mu.Unlock()
			time.Sleep(time.Millisecond)
			a.mu.Lock()
		}
		if len(a.queue) >= a.cap {
			a.mu.Unlock()
			a.dropped(1)
			return
		}
	}
	a.queue = append(a.queue, e)
	a.mu.Unlock()
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// Get implements AuditLog: the local ring first, then the shared stream,
// newest first, a page at a time (bounded by the stream's length).
func (a *RedisAudit) Get(ctx context.Context, id string) (*Entry, bool, error) {
	if e, ok, _ := a.local.Get(ctx, id); ok {
		return e, true, nil
	}
	const page = 1000
	end := "+"
	for read := int64(0); read <= a.maxEntries+page; read += page {
		msgs, err := a.c.XRevRangeN(ctx, a.stream, end, "-", page).Result()
		if err != nil {
			return nil, false, err
		}
		for _, m := range msgs {
			if m.Values["id"] != id {
				continue
			}
			raw, _ := m.Values["entry"].(string)
			var e Entry
			if err := json.Unmarshal([]byte(raw), &e); err != nil {
				return nil, false, err
			}
			return &e, true, nil
		}
		if len(msgs) < page {
			return nil, false, nil
		}
		end = "(" + msgs[len(msgs)-1].ID
	}
	return nil, false, nil
}

func (a *RedisAudit) run() {
	defer close(a.done)
	backoff := 5 * time.Millisecond
	for {
		select {
		case <-a.wake:
			// linger briefly so a batch carries many entries: under load the
			// writer costs a round trip per batch, not per request
			select {
			case <-time.After(10 * time.Millisecond):
			case <-a.stop:
			}
		case <-a.stop:
			return
		case <-time.After(backoff):
		}
		if a.flush(context.Background()) {
			backoff = 5 * time.Millisecond
		} else {
			backoff = min(2*backoff, time.Second)
		}
	}
}

// flush writes up to 512 queued entries in one pipeline; false on failure
// (the batch stays queued, in order).
func (a *RedisAudit) flush(ctx context.Context) bool {
	for {
		a.mu.Lock()
		n := min(len(a.queue), 512)
		batch := a.queue[:n:n]
		a.mu.Unlock()
		if n == 0 {
			return true
		}
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := a.c.Pipelined(cctx, func(p redis.Pipeliner) error {
			for _, e := range batch {
				b, _ := json.Marshal(e)
				p.XAdd(cctx, &redis.XAddArgs{Stream: a.stream, MaxLen: a.maxEntries, Approx: true, Values: []any{"id", e.RequestID, "entry", b}})
			}
			if time.Since(a.expired) > time.Minute {
				p.Expire(cctx, a.stream, 7*a.ttl)
			}
			return nil
		})
		cancel()
		if err != nil {
			return false
		}
		if time.Since(a.expired) > time.Minute {
			a.expired = time.Now()
		}
		a.mu.Lock()
		a.queue = a.queue[n:]
		a.mu.Unlock()
	}
}

// Close flushes queued entries within ctx.
func (a *RedisAudit) Close(ctx context.Context) error {
	close(a.stop)
	<-a.done
	for !a.flush(ctx) {
		select {
		case <-ctx.Done():
			a.mu.Lock()
			n := len(a.queue)
			a.mu.Unlock()
			a.dropped(n)
			return errors.New("audit: entries still queued at shutdown: Redis unreachable")
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

var _ AuditLog = (*RedisAudit)(nil)
