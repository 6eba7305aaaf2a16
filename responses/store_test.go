package responses

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"switchyard/internal/fakeclock"
	"switchyard/wire"
)

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

// rec is a turn: input items, output items (ids derived from id as the
// gateway derives them) and a link to prev.
func rec(id, prev string, in []wire.Item, out ...string) *Record {
	r := &Record{ID: id, Prev: prev, Input: in, Response: json.RawMessage(`{"id":"` + id + `"}`)}
	for i, text := range out {
		r.Output = append(r.Output, wire.Item{Type: "message", ID: outID(id, i), Role: "assistant", Content: []wire.Part{{Type: "output_text", Text: text}}})
	}
	return r
}

// outID is the id the gateway gives output item n of response id.
func outID(id string, n int) string {
	return "msg_" + strings.TrimPrefix(id, "resp_") + "_" + strconv.Itoa(n)
}

func msg(id, role, text string) wire.Item {
	return wire.Item{Type: "message", ID: id, Role: role, Content: []wire.Part{{Type: "input_text", Text: text}}}
}

func text(it wire.Item) string { return it.Text() }

var big = Budget{Bytes: 1 << 30, Depth: 100000}

// impl is one store under test with a way to move time for it and to make
// a second node's view (a fresh store over the same shared state).
type impl struct {
	store   Store
	advance func(time.Duration)
	other   func() Store // another node; nil when the store is not shared
	flush   func()
	stored  func(team string) int64 // bytes the store accounts to team
}

func impls(t *testing.T, cfg Config) map[string]func() impl {
	return map[string]func() impl{
		"local": func() impl {
			c := fakeclock.New(t0)
			l := NewLocal(c.Now, cfg)
			return impl{store: l, advance: c.Advance, flush: func() {}, stored: func(string) int64 { return l.Bytes() }}
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
				stored:  func(team string) int64 { return accounted(mr, team) },
				flush: func() {
					ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
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
			r1 := rec("resp_a1", "", []wire.Item{msg("", "user", "hi")}, "hello")
			r1.Session = "team-a:fp:1"
			s.Save("team-a", r1)
			im.flush()

			o1 := outID("resp_a1", 0)
			lk, err := s.Load(ctx, "team-a", "resp_a1", []string{o1, "msg_a1_7", "msg_nope"}, big)
			if err != nil || len(lk.Chain) != 1 || len(lk.Chain[0].Items()) != 2 || lk.Chain[0].Session != "team-a:fp:1" {
				t.Fatalf("load: %+v %v", lk, err)
			}
			if _, ok := lk.Items[o1]; !ok || len(lk.Items) != 1 {
				t.Fatalf("items: %+v", lk.Items)
			}
			// scoped by team: another team sees nothing
			if _, err := s.Load(ctx, "team-b", "resp_a1", nil, big); !errors.Is(err, ErrNotFound) {
				t.Fatalf("other team: %v", err)
			}
			if lk, _ := s.Load(ctx, "team-b", "", []string{o1}, big); len(lk.Items) != 0 {
				t.Fatal("another team's item must not resolve")
			}
			if _, err := s.Get(ctx, "team-a", "resp_unknown"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("unknown: %v", err)
			}
			if im.other != nil { // a second node finds it in Redis
				o := im.other()
				lk, err := o.Load(ctx, "team-a", "resp_a1", []string{o1}, big)
				if err != nil || len(lk.Chain) != 1 || lk.Chain[0].Session != "team-a:fp:1" || len(lk.Items) != 1 || text(lk.Items[o1]) != "hello" {
					t.Fatalf("other node: %+v %v", lk, err)
				}
				got, err := o.Get(ctx, "team-a", "resp_a1")
				if err != nil || string(got.Response) != `{"id":"resp_a1"}` {
					t.Fatalf("other node get: %+v %v", got, err)
				}
			}
			ok, err := s.Delete(ctx, "team-a", "resp_a1")
			if !ok || err != nil {
				t.Fatalf("delete: %v %v", ok, err)
			}
			if _, err := s.Get(ctx, "team-a", "resp_a1"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("after delete: %v", err)
			}
			if lk, _ := s.Load(ctx, "team-a", "", []string{o1}, big); len(lk.Items) != 0 {
				t.Fatal("a deleted response's items must go with it")
			}
			if ok, _ := s.Delete(ctx, "team-a", "resp_a1"); ok {
				t.Fatal("second delete must report unknown")
			}

			// expiry on the (fake) clock
			s.Save("team-a", rec("resp_a2", "", nil, "x"))
			im.flush()
			im.advance(59 * time.Minute)
			if _, err := s.Get(ctx, "team-a", "resp_a2"); err != nil {
				t.Fatalf("before ttl: %v", err)
			}
			im.advance(2 * time.Minute)
			if _, err := s.Get(ctx, "team-a", "resp_a2"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("after ttl: %v", err)
			}
		})
	}
}

// Deleting a follow-up removes only its own record: a reference to an
// earlier turn's output still resolves, here and on another node; a chain
// through the deleted turn names it as missing.
func TestDeleteKeepsEarlierTurns(t *testing.T) {
	ctx := context.Background()
	for name, mk := range impls(t, Config{TTL: time.Hour, MaxLocal: 100}) {
		t.Run(name, func(t *testing.T) {
			im := mk()
			s := im.store
			s.Save("team-a", rec("resp_b1", "", []wire.Item{msg("", "user", "hi")}, "hello"))
			// turn 2 carries turn 1's output id on an input item (a client
			// resending it): it neither shadows nor owns that item
			s.Save("team-a", rec("resp_b2", "resp_b1", []wire.Item{msg(outID("resp_b1", 0), "assistant", "forged")}, "sure"))
			s.Save("team-a", rec("resp_b3", "resp_b2", []wire.Item{msg("", "user", "more")}, "ok"))
			im.flush()
			lk, err := s.Load(ctx, "team-a", "resp_b3", nil, big)
			if err != nil || len(lk.Chain) != 3 || lk.Chain[0].ID != "resp_b1" || lk.Chain[2].ID != "resp_b3" {
				t.Fatalf("chain: %+v %v", lk.Chain, err)
			}
			del := s
			if im.other != nil {
				del = im.other() // the delete arrives on another node
			}
			if ok, err := del.Delete(ctx, "team-a", "resp_b2"); !ok || err != nil {
				t.Fatalf("delete: %v %v", ok, err)
			}
			views := []Store{s}
			if im.other != nil {
				views = append(views, im.other())
			}
			for i, v := range views {
				lk, err := v.Load(ctx, "team-a", "", []string{outID("resp_b1", 0), outID("resp_b2", 0)}, big)
				if err != nil {
					t.Fatalf("view %d: %v", i, err)
				}
				if it, ok := lk.Items[outID("resp_b1", 0)]; !ok || text(it) != "hello" {
					t.Errorf("view %d: turn 1's item went with turn 2 or was shadowed: %+v", i, it)
				}
				if _, ok := lk.Items[outID("resp_b2", 0)]; ok && (im.other == nil || i > 0) {
					t.Errorf("view %d: turn 2's item outlived its response", i)
				}
				if im.other != nil && i == 0 {
					continue // this node's local copy of turn 2 went only where the delete ran
				}
				var miss *MissingError
				if _, err := v.Load(ctx, "team-a", "resp_b3", nil, big); !errors.As(err, &miss) || miss.ID != "resp_b2" {
					t.Errorf("view %d: a chain through a deleted turn must name it: %v", i, err)
				}
			}
		})
	}
}

// Client-chosen ids are never indexed: two responses whose inputs carry
// the same id do not overwrite each other, and only the gateway's own
// output ids resolve (issue 30, finding 10).
func TestItemIDsCannotCollide(t *testing.T) {
	ctx := context.Background()
	for name, mk := range impls(t, Config{TTL: time.Hour, MaxLocal: 100}) {
		t.Run(name, func(t *testing.T) {
			im := mk()
			s := im.store
			s.Save("t", rec("resp_c1", "", []wire.Item{msg("msg_1", "user", "one")}, "answer one"))
			s.Save("t", rec("resp_c2", "", []wire.Item{msg("msg_1", "user", "two")}, "answer two"))
			im.flush()
			views := []Store{s}
			if im.other != nil {
				views = append(views, im.other())
			}
			for i, v := range views {
				lk, err := v.Load(ctx, "t", "", []string{"msg_1", outID("resp_c1", 0), outID("resp_c2", 0)}, big)
				if err != nil {
					t.Fatal(err)
				}
				if _, ok := lk.Items["msg_1"]; ok {
					t.Errorf("view %d: a client-chosen id resolved", i)
				}
				if text(lk.Items[outID("resp_c1", 0)]) != "answer one" || text(lk.Items[outID("resp_c2", 0)]) != "answer two" {
					t.Errorf("view %d: %+v", i, lk.Items)
				}
			}
		})
	}
}

func TestItemResponse(t *testing.T) {
	for _, tt := range []struct {
		id, resp string
		ok       bool
	}{
		{"msg_ab12_0", "resp_ab12", true},
		{"fc_ab12_13", "resp_ab12", true},
		{"msg_a_b_2", "resp_a_b", true},
		{"msg_1", "", false},
		{"msg__1", "", false},
		{"msg_ab_x", "", false},
		{"rs_ab_1", "", false},
		{"", "", false},
	} {
		got, ok := ItemResponse(tt.id)
		if got != tt.resp || ok != tt.ok {
			t.Errorf("%q: %q %v, want %q %v", tt.id, got, ok, tt.resp, tt.ok)
		}
	}
}

// A conversation of N turns stores O(N) bytes: each turn its own items and
// a link, never a copy (issue 30, finding 2). Load walks the links back in
// order, within the byte and depth budget.
func TestLinkedTurnsStoreLinearBytes(t *testing.T) {
	ctx := context.Background()
	const turns, text = 200, 1000
	for name, mk := range impls(t, Config{TTL: time.Hour, MaxLocal: 1000, MaxLocalBytes: 1 << 30, MaxTeamBytes: 1 << 30}) {
		t.Run(name, func(t *testing.T) {
			im := mk()
			s := im.store
			prev := ""
			for i := range turns {
				id := "resp_d" + strconv.Itoa(i)
				s.Save("t", rec(id, prev, []wire.Item{msg("", "user", strings.Repeat("q", text))}, strings.Repeat("a", text)))
				prev = id
			}
			im.flush()
			// one turn is 2*text bytes of items plus framing; copies would
			// make it turns*(turns+1)/2 turns' worth (~40 MB here)
			bound := int64(turns * (2*text + 1024))
			if got := im.stored("t"); got > bound || got < int64(turns*2*text) {
				t.Fatalf("%d turns hold %d bytes, want within [%d, %d]", turns, got, turns*2*text, bound)
			}
			views := []Store{s}
			if im.other != nil {
				views = append(views, im.other()) // walked in Redis
			}
			for i, v := range views {
				lk, err := v.Load(ctx, "t", prev, nil, Budget{Bytes: turns * (2*text + 64), Depth: turns})
				if err != nil || len(lk.Chain) != turns {
					t.Fatalf("view %d: %d turns, %v", i, len(lk.Chain), err)
				}
				for k, r := range lk.Chain {
					if r.ID != "resp_d"+strconv.Itoa(k) {
						t.Fatalf("view %d: turn %d is %s", i, k, r.ID)
					}
				}
				if _, err := v.Load(ctx, "t", prev, nil, Budget{Bytes: turns * (2*text + 64), Depth: turns - 1}); !errors.Is(err, ErrTooDeep) {
					t.Fatalf("view %d: depth: %v", i, err)
				}
				if _, err := v.Load(ctx, "t", prev, nil, Budget{Bytes: text, Depth: turns}); !errors.Is(err, ErrTooLarge) {
					t.Fatalf("view %d: bytes: %v", i, err)
				}
			}
		})
	}
}

// The local store is bounded in bytes as well as in count, oldest first.
func TestLocalBoundedBytes(t *testing.T) {
	c := fakeclock.New(t0)
	const maxBytes = 64 << 10
	l := NewLocal(c.Now, Config{TTL: time.Hour, MaxLocal: 10000, MaxLocalBytes: maxBytes})
	for i := range 100 {
		l.Save("t", rec("resp_e"+strconv.Itoa(i), "", nil, strings.Repeat("x", 4<<10)))
		if l.Bytes() > maxBytes {
			t.Fatalf("after %d saves the store holds %d bytes, over %d", i+1, l.Bytes(), maxBytes)
		}
	}
	if n := l.Len(); n < 10 || n > 16 {
		t.Fatalf("%d records of ~4 KiB in 64 KiB", n)
	}
	if _, err := l.Get(context.Background(), "t", "resp_e0"); !errors.Is(err, ErrNotFound) {
		t.Fatal("the oldest is evicted first")
	}
	if _, err := l.Get(context.Background(), "t", "resp_e99"); err != nil {
		t.Fatal("the newest stays")
	}
	// one record larger than the whole store is not kept, and evicts nothing
	l.Save("t", rec("resp_huge", "", nil, strings.Repeat("x", maxBytes)))
	if _, err := l.Get(context.Background(), "t", "resp_huge"); !errors.Is(err, ErrNotFound) {
		t.Fatal("a record over max_local_bytes must not be kept")
	}
	if _, err := l.Get(context.Background(), "t", "resp_e99"); err != nil {
		t.Fatal("an oversized record must not evict the others")
	}
}

func TestLocalBounded(t *testing.T) {
	c := fakeclock.New(t0)
	l := NewLocal(c.Now, Config{TTL: time.Hour, MaxLocal: 3})
	for i := range 10 {
		id := "resp_" + string(rune('a'+i))
		l.Save("t", rec(id, "", nil, "x"))
	}
	if l.Len() != 3 {
		t.Fatalf("len %d, want 3", l.Len())
	}
	if _, err := l.Get(context.Background(), "t", "resp_a"); !errors.Is(err, ErrNotFound) {
		t.Fatal("the oldest is evicted first")
	}
	if _, err := l.Get(context.Background(), "t", "resp_j"); err != nil {
		t.Fatal("the newest stays")
	}
}

// Each team's share of Redis is bounded in bytes, its oldest evicted
// first, and one team's writes never evict another's (issue 30, finding 2).
func TestRedisTeamBytes(t *testing.T) {
	ctx := context.Background()
	mr := miniredis.RunT(t)
	c := fakeclock.New(t0)
	const maxTeam = 64 << 10
	cfg := Config{TTL: time.Hour, MaxLocal: 10000, MaxLocalBytes: 1 << 30, MaxTeamBytes: maxTeam}
	newStore := func() *Redis {
		cl := redis.NewClient(&redis.Options{Addr: mr.Addr()})
		t.Cleanup(func() { cl.Close() })
		r := NewRedis(cl, "sy:", time.Second, cfg, NewLocal(c.Now, cfg), nil)
		t.Cleanup(func() { _ = r.Close(context.Background()) })
		return r
	}
	r := newStore()
	r.Save("quiet", rec("resp_q0", "", nil, "keep me"))
	for i := range 100 {
		r.Save("loud", rec("resp_l"+strconv.Itoa(i), "", nil, strings.Repeat("x", 4<<10)))
	}
	flush(t, r)
	if got := redisBytes(mr, "sy:{team:loud}:"); got > maxTeam {
		t.Fatalf("team loud holds %d bytes in Redis, over %d", got, maxTeam)
	}
	if got := accounted(mr, "loud"); got > maxTeam || got < maxTeam/2 {
		t.Fatalf("team loud accounted %d bytes, want about %d", got, maxTeam)
	}
	o := newStore() // a fresh node reads Redis only
	if _, err := o.Get(ctx, "quiet", "resp_q0"); err != nil {
		t.Fatalf("another team's write evicted quiet's: %v", err)
	}
	if _, err := o.Get(ctx, "loud", "resp_l0"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the team's oldest is evicted first: %v", err)
	}
	if _, err := o.Get(ctx, "loud", "resp_l99"); err != nil {
		t.Fatalf("the newest stays: %v", err)
	}
	// a delete gives its bytes back
	before := accounted(mr, "loud")
	if ok, err := o.Delete(ctx, "loud", "resp_l99"); !ok || err != nil {
		t.Fatalf("delete: %v %v", ok, err)
	}
	if after := accounted(mr, "loud"); after >= before {
		t.Fatalf("accounted %d after a delete, %d before", after, before)
	}
	// keys carry the store's TTL
	for _, k := range mr.Keys() {
		if mr.TTL(k) <= 0 {
			t.Errorf("key %s has no TTL", k)
		}
	}
}

func flush(t *testing.T, r *Redis) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := r.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

// redisBytes sums the stored turns' field values under a team's prefix.
func redisBytes(mr *miniredis.Miniredis, prefix string) int64 {
	var n int64
	for _, k := range mr.Keys() {
		if !strings.HasPrefix(k, prefix+"turn:") {
			continue
		}
		fields, _ := mr.HKeys(k)
		for _, f := range fields {
			n += int64(len(mr.HGet(k, f)))
		}
	}
	return n
}

// accounted is a team's byte count as the save script keeps it.
func accounted(mr *miniredis.Miniredis, team string) int64 {
	n, _ := strconv.ParseInt(mr.HGet("sy:{team:"+team+"}:rstore", "b"), 10, 64)
	return n
}

func TestRedisDownFallsBackToLocal(t *testing.T) {
	mr := miniredis.RunT(t)
	cl := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1})
	defer cl.Close()
	c := fakeclock.New(t0)
	r := NewRedis(cl, "sy:", 50*time.Millisecond, Config{TTL: time.Hour, MaxLocal: 10}, NewLocal(c.Now, Config{TTL: time.Hour, MaxLocal: 10}), nil)
	defer r.Close(context.Background())
	r.Save("t", rec("resp_1", "", nil))
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

// A follow-up served on another node: its own turn is in that node's local
// store, the earlier ones are walked in Redis, in one script call.
func TestRedisChainAcrossNodes(t *testing.T) {
	ctx := context.Background()
	mk := impls(t, Config{TTL: time.Hour, MaxLocal: 100})["redis"]
	im := mk()
	im.store.Save("t", rec("resp_f1", "", []wire.Item{msg("", "user", "one")}, "a1"))
	im.store.Save("t", rec("resp_f2", "resp_f1", []wire.Item{msg("", "user", "two")}, "a2"))
	im.flush()
	b := im.other()
	b.Save("t", rec("resp_f3", "resp_f2", []wire.Item{msg("", "user", "three")}, "a3"))
	lk, err := b.Load(ctx, "t", "resp_f3", []string{outID("resp_f1", 0)}, big)
	if err != nil || len(lk.Chain) != 3 {
		t.Fatalf("chain: %+v %v", lk.Chain, err)
	}
	for i, want := range []string{"resp_f1", "resp_f2", "resp_f3"} {
		if lk.Chain[i].ID != want || text(lk.Chain[i].Output[0]) != "a"+strconv.Itoa(i+1) {
			t.Fatalf("turn %d: %+v", i, lk.Chain[i])
		}
	}
	if text(lk.Items[outID("resp_f1", 0)]) != "a1" {
		t.Fatalf("items: %+v", lk.Items)
	}
}
