package responses

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"switchyard/internal/fakeclock"
	"switchyard/wire"
)

// A response deleted through one node must be gone for previous_response_id
// and item_reference on every node too (SPEC 10.1: DELETE removes it; an
// unknown id is 404), not only for GET: the node that served it kept its
// local copy, and Load expanded the deleted turn (or its items) from there.
// While Redis is unreachable, the node's copy still answers.
func TestHostile4DeletedResponseNotExpanded(t *testing.T) {
	ctx := context.Background()
	cfg := Config{TTL: time.Hour, MaxLocal: 100}
	for _, tc := range []struct {
		name    string
		prev    string
		refs    []string
		deleted string
		check   func(t *testing.T, lk Lookup, err error)
	}{
		{"previous_response_id is the deleted turn", "resp_d1", nil, "resp_d1", func(t *testing.T, lk Lookup, err error) {
			var me *MissingError
			if !errors.As(err, &me) || me.ID != "resp_d1" {
				t.Fatalf("deleted turn expanded: %+v %v", lk.Chain, err)
			}
		}},
		{"an earlier turn was deleted", "resp_d2", nil, "resp_d1", func(t *testing.T, lk Lookup, err error) {
			var me *MissingError
			if !errors.As(err, &me) || me.ID != "resp_d1" {
				t.Fatalf("deleted earlier turn expanded: %+v %v", lk.Chain, err)
			}
		}},
		{"item_reference to a deleted turn's item", "", []string{outID("resp_d1", 0), outID("resp_d2", 0)}, "resp_d1", func(t *testing.T, lk Lookup, err error) {
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := lk.Items[outID("resp_d1", 0)]; ok {
				t.Fatalf("deleted turn's item expanded: %+v", lk.Items)
			}
			if text(lk.Items[outID("resp_d2", 0)]) != "a2" {
				t.Fatalf("a kept turn's item lost: %+v", lk.Items)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mr := miniredis.RunT(t)
			c := fakeclock.New(t0)
			a, b := redisStore(t, mr, c, cfg), redisStore(t, mr, c, cfg)
			a.Save("t", rec("resp_d1", "", []wire.Item{msg("", "user", "one")}, "a1"))
			a.Save("t", rec("resp_d2", "resp_d1", []wire.Item{msg("", "user", "two")}, "a2"))
			flush(t, a)
			if ok, err := b.Delete(ctx, "t", tc.deleted); !ok || err != nil {
				t.Fatalf("delete on node b: %v %v", ok, err)
			}
			lk, err := a.Load(ctx, "t", tc.prev, tc.refs, big)
			tc.check(t, lk, err)
		})
	}
	t.Run("Redis down: the node's copy answers", func(t *testing.T) {
		mr := miniredis.RunT(t)
		c := fakeclock.New(t0)
		cl := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1})
		t.Cleanup(func() { cl.Close() })
		a := NewRedis(cl, "sy:", 50*time.Millisecond, cfg, NewLocal(c.Now, cfg), nil)
		t.Cleanup(func() { _ = a.Close(context.Background()) })
		a.Save("t", rec("resp_d1", "", []wire.Item{msg("", "user", "one")}, "a1"))
		a.Save("t", rec("resp_d2", "resp_d1", []wire.Item{msg("", "user", "two")}, "a2"))
		flush(t, a)
		mr.Close()
		lk, err := a.Load(ctx, "t", "resp_d2", []string{outID("resp_d1", 0)}, big)
		if err != nil || len(lk.Chain) != 2 || text(lk.Items[outID("resp_d1", 0)]) != "a1" {
			t.Fatalf("with Redis down: %+v %+v %v", lk.Chain, lk.Items, err)
		}
	})
}
