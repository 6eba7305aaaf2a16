package responses

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"switchyard/internal/fakeclock"
	"switchyard/wire"
)

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

func rec(id string, items ...wire.Item) *Record {
	return &Record{ID: id, Items: items, Response: json.RawMessage(`{"id":"` + id + `"}`)}
}

func msg(id, role, text string) wire.Item {
	return wire.Item{Type: "message", ID: id, Role: role, Content: []wire.Part{{Type: "input_text", Text: text}}}
}

// impl is one store under test with a way to move time for it and to make
// a second node's view (a fresh store over the same shared state).
type impl struct {
	store   Store
	advance func(time.Duration)
	other   func() Store // another node; nil when the store is not shared
	flush   func()
}

func impls(t *testing.T, cfg Config) map[string]func() impl {
	return map[string]func() impl{
		"local": func() impl {
			c := fakeclock.New(t0)
			return impl{store: NewLocal(c.Now, cfg), advance: c.Advance, flush: func() {}}
		},
		"redis": func() impl {
			mr := miniredis.RunT(t)
			c := fakeclock.New(t0)
			newStore := func() *Redis {
				cl := redis.NewClient(&redis.Options{Addr: mr.Addr()})
				t.Cleanup(func() { cl.Close() })
				r := NewRedis(cl, "sy:", time.Second, cfg, NewLocal(c.Now, cfg), nil)
				t.Cleanup(func() { _ = r.Close(context.Background()) })
				return r
			}
			r := newStore()
			return impl{
				store:   r,
				advance: func(d time.Duration) { c.Advance(d); mr.FastForward(d) },
				other:   func() Store { return newStore() },
				flush: func() {
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					defer cancel()
					if err := r.Flush(ctx); err != nil {
						t.Fatal(err)
					}
				},
			}
		},
	}
}

func TestStoreScenarios(t *testing.T) {
	ctx := context.Background()
	for name, mk := range impls(t, Config{TTL: time.Hour, MaxLocal: 100}) {
		t.Run(name, func(t *testing.T) {
			im := mk()
			s := im.store
			r1 := rec("resp_1", msg("", "user", "hi"), msg("msg_1", "assistant", "hello"))
			r1.First = 0
			r1.Session = "team-a:fp:1"
			s.Save("team-a", r1)
			im.flush()

			lk, err := s.Load(ctx, "team-a", "resp_1", []string{"msg_1", "msg_nope"})
			if err != nil || lk.Previous == nil || len(lk.Previous.Items) != 2 || lk.Previous.Session != "team-a:fp:1" {
				t.Fatalf("load: %+v %v", lk, err)
			}
			if _, ok := lk.Items["msg_1"]; !ok || len(lk.Items) != 1 {
				t.Fatalf("items: %+v", lk.Items)
			}
			// scoped by team: another team sees nothing
			if _, err := s.Load(ctx, "team-b", "resp_1", nil); !errors.Is(err, ErrNotFound) {
				t.Fatalf("other team: %v", err)
			}
			if lk, _ := s.Load(ctx, "team-b", "", []string{"msg_1"}); len(lk.Items) != 0 {
				t.Fatal("another team's item must not resolve")
			}
			if _, err := s.Get(ctx, "team-a", "resp_unknown"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("unknown: %v", err)
			}
			if im.other != nil { // a second node finds it in Redis
				o := im.other()
				lk, err := o.Load(ctx, "team-a", "resp_1", []string{"msg_1"})
				if err != nil || lk.Previous == nil || string(lk.Previous.Response) != `{"id":"resp_1"}` || len(lk.Items) != 1 {
					t.Fatalf("other node: %+v %v", lk, err)
				}
			}
			ok, err := s.Delete(ctx, "team-a", "resp_1")
			if !ok || err != nil {
				t.Fatalf("delete: %v %v", ok, err)
			}
			if _, err := s.Get(ctx, "team-a", "resp_1"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("after delete: %v", err)
			}
			if lk, _ := s.Load(ctx, "team-a", "", []string{"msg_1"}); len(lk.Items) != 0 {
				t.Fatal("a deleted response's items must go with it")
			}
			if ok, _ := s.Delete(ctx, "team-a", "resp_1"); ok {
				t.Fatal("second delete must report unknown")
			}

			// expiry on the (fake) clock
			s.Save("team-a", rec("resp_2", msg("msg_2", "assistant", "x")))
			im.flush()
			im.advance(59 * time.Minute)
			if _, err := s.Get(ctx, "team-a", "resp_2"); err != nil {
				t.Fatalf("before ttl: %v", err)
			}
			im.advance(2 * time.Minute)
			if _, err := s.Get(ctx, "team-a", "resp_2"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("after ttl: %v", err)
			}
		})
	}
}

// Deleting a follow-up removes only the items that turn added: a reference
// to an earlier turn's output still resolves, here and on another node.
func TestDeleteKeepsEarlierTurns(t *testing.T) {
	ctx := context.Background()
	for name, mk := range impls(t, Config{TTL: time.Hour, MaxLocal: 100}) {
		t.Run(name, func(t *testing.T) {
			im := mk()
			s := im.store
			r1 := rec("resp_1", msg("", "user", "hi"), msg("msg_1", "assistant", "hello"))
			s.Save("team-a", r1)
			r2 := rec("resp_2", msg("", "user", "hi"), msg("msg_1", "assistant", "hello"),
				msg("", "user", "more"), msg("msg_2", "assistant", "sure"))
			r2.First = 2
			s.Save("team-a", r2)
			im.flush()
			del := s
			if im.other != nil {
				del = im.other() // the delete arrives on another node
			}
			if ok, err := del.Delete(ctx, "team-a", "resp_2"); !ok || err != nil {
				t.Fatalf("delete: %v %v", ok, err)
			}
			views := []Store{s}
			if im.other != nil {
				views = append(views, im.other())
			}
			for i, v := range views {
				lk, err := v.Load(ctx, "team-a", "", []string{"msg_1", "msg_2"})
				if err != nil {
					t.Fatalf("view %d: %v", i, err)
				}
				if _, ok := lk.Items["msg_1"]; !ok {
					t.Errorf("view %d: turn 1's item went with turn 2", i)
				}
				if _, ok := lk.Items["msg_2"]; ok && im.other != nil && i > 0 {
					t.Errorf("view %d: turn 2's item outlived its response", i)
				}
			}
		})
	}
}

func TestLocalBounded(t *testing.T) {
	c := fakeclock.New(t0)
	l := NewLocal(c.Now, Config{TTL: time.Hour, MaxLocal: 3})
	for i := range 10 {
		id := "resp_" + string(rune('a'+i))
		l.Save("t", rec(id, msg("msg_"+id, "assistant", "x")))
	}
	if l.Len() != 3 || len(l.items) != 3 {
		t.Fatalf("len %d items %d, want 3 and 3", l.Len(), len(l.items))
	}
	if _, err := l.Get(context.Background(), "t", "resp_a"); !errors.Is(err, ErrNotFound) {
		t.Fatal("the oldest is evicted first")
	}
	if _, err := l.Get(context.Background(), "t", "resp_j"); err != nil {
		t.Fatal("the newest stays")
	}
}

func TestRedisDownFallsBackToLocal(t *testing.T) {
	mr := miniredis.RunT(t)
	cl := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1})
	defer cl.Close()
	c := fakeclock.New(t0)
	r := NewRedis(cl, "sy:", 50*time.Millisecond, Config{TTL: time.Hour, MaxLocal: 10}, NewLocal(c.Now, Config{TTL: time.Hour, MaxLocal: 10}), nil)
	defer r.Close(context.Background())
	r.Save("t", rec("resp_1"))
	mr.Close()
	if _, err := r.Get(context.Background(), "t", "resp_1"); err != nil {
		t.Fatalf("a node's own response survives Redis going away: %v", err)
	}
	start := time.Now()
	if _, err := r.Get(context.Background(), "t", "resp_other"); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("want ErrUnavailable, got %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("a read with Redis down must be bounded, took %v", d)
	}
}
