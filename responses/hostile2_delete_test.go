package responses

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"switchyard/internal/fakeclock"
)

// gatedClient holds the store writer's pipelines until open is closed, so
// a test can act while a saved record is on its way to Redis.
type gatedClient struct {
	*redis.Client
	entered chan struct{} // closed when the first pipeline waits
	open    chan struct{}
	once    sync.Once
}

func (g *gatedClient) Pipelined(ctx context.Context, fn func(redis.Pipeliner) error) ([]redis.Cmder, error) {
	g.once.Do(func() { close(g.entered) })
	select {
	case <-g.open:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return g.Client.Pipelined(ctx, fn)
}

// A DELETE must remove a response for good (SPEC 10.1), on every node:
//   - deleted while its write to Redis was still queued, it used to be
//     written afterwards and come back (GET 200 after DELETE 200);
//   - deleted on another node, it used to stay in the local store of the
//     node that served it, which kept answering GET with it.
func TestHostile2DeletedResponseStaysDeleted(t *testing.T) {
	cfg := Config{TTL: time.Hour, MaxLocal: 100}
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, mr *miniredis.Miniredis, c *fakeclock.Clock)
	}{
		{"deleted while its write is queued", func(t *testing.T, mr *miniredis.Miniredis, c *fakeclock.Clock) {
			ctx := context.Background()
			g := &gatedClient{Client: redis.NewClient(&redis.Options{Addr: mr.Addr()}), entered: make(chan struct{}), open: make(chan struct{})}
			t.Cleanup(func() { g.Client.Close() })
			r := NewRedis(g, "sy:", 5*time.Second, cfg, NewLocal(c.Now, cfg), nil)
			t.Cleanup(func() { _ = r.Close(context.Background()) })
			r.Save("t", rec("resp_q", "", nil, "answer"))
			waitClosed(t, g.entered) // the writer holds the record
			done := make(chan error, 1)
			go func() {
				ok, err := r.Delete(ctx, "t", "resp_q")
				if err == nil && !ok {
					err = errors.New("delete found nothing")
				}
				done <- err
			}()
			// the delete returns while the write is held (it hands the
			// writer a delete to run after it); then the write may go
			var derr error
			returned := false
			for deadline := time.Now().Add(10 * time.Second); !returned && len(r.queue) == 0; runtime.Gosched() {
				select {
				case derr = <-done:
					returned = true
				default:
				}
				if time.Now().After(deadline) {
					t.Fatal("delete neither returned nor handed the writer a delete")
				}
			}
			close(g.open)
			if !returned {
				select {
				case derr = <-done:
				case <-time.After(10 * time.Second):
					t.Fatal("delete did not return")
				}
			}
			if derr != nil {
				t.Fatalf("delete: %v", derr)
			}
			flush(t, r)
			for _, s := range []Store{r, redisStore(t, mr, c, cfg)} {
				if got, err := s.Get(ctx, "t", "resp_q"); !errors.Is(err, ErrNotFound) {
					t.Fatalf("deleted response is back: %+v %v", got, err)
				}
			}
		}},
		{"deleted on another node", func(t *testing.T, mr *miniredis.Miniredis, c *fakeclock.Clock) {
			ctx := context.Background()
			a, b := redisStore(t, mr, c, cfg), redisStore(t, mr, c, cfg)
			a.Save("t", rec("resp_x", "", nil, "answer"))
			flush(t, a)
			if ok, err := b.Delete(ctx, "t", "resp_x"); !ok || err != nil {
				t.Fatalf("delete on node b: %v %v", ok, err)
			}
			for name, s := range map[string]Store{"a": a, "b": b} {
				if got, err := s.Get(ctx, "t", "resp_x"); !errors.Is(err, ErrNotFound) {
					t.Fatalf("node %s still answers the deleted response: %+v %v", name, got, err)
				}
			}
			// a response not written to Redis (yet, or ever) is still
			// served from the node's own store
			a.Save("t", rec("resp_own", "", nil, "mine"))
			if _, err := a.Get(ctx, "t", "resp_own"); err != nil {
				t.Fatalf("own unflushed response: %v", err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.run(t, miniredis.RunT(t), fakeclock.New(t0))
		})
	}
}

func redisStore(t *testing.T, mr *miniredis.Miniredis, c *fakeclock.Clock, cfg Config) *Redis {
	t.Helper()
	cl := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { cl.Close() })
	r := NewRedis(cl, "sy:", 5*time.Second, cfg, NewLocal(c.Now, cfg), nil)
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	return r
}

func waitClosed(t *testing.T, ch chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("timed out")
	}
}
