package telemetry

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"switchyard/internal/heaptest"
)

// fullEntry is an entry with every kind of field set.
func fullEntry(i int) *Entry {
	return &Entry{
		RequestID: fmt.Sprintf("req-%d", i), Node: "n1", Time: time.Date(2026, 12, 7, 4, 0, 0, i, time.UTC), Team: fmt.Sprintf("team-%d", i%7),
		Key: "cfg_0123", User: "u\"1", Operation: "chat", Stream: i%2 == 0, RequestedModel: "normal", RoutedModel: fmt.Sprintf("m%d", i%3),
		Deployment: "d1", Tier: &TierVerdict{Alias: "normal", Tier: "hard", Score: 3, Source: "classifier", Target: "m1", Signals: []Signal{{Name: "code", Points: 2, Detail: "```"}}},
		Session: "header", Attempts: []Attempt{{Deployment: "d0", Status: 503}, {Deployment: "d1", Status: 200}}, FallbackReason: "general",
		PromptTokens: 12, CachedTokens: 4, CompletionTokens: 30, CostUSD: 0.000123, Status: 200 + i%2, Error: "é\n", DurationMs: 1.5, OverheadMs: 0.25,
	}
}

// What the ring returns is what was recorded, field for field.
func TestRingReturnsWhatWasRecorded(t *testing.T) {
	r := NewRing(10)
	ctx := context.Background()
	for i := range 4 {
		r.Record(fullEntry(i))
	}
	got, _ := r.Recent(ctx, Filter{})
	if len(got) != 4 {
		t.Fatalf("%d entries", len(got))
	}
	for j, e := range got {
		want := fullEntry(3 - j)
		if e.raw != nil || !e.Time.Equal(want.Time) {
			t.Fatalf("entry %d: raw %q, time %v", j, e.raw, e.Time)
		}
		e.Time = want.Time
		if !reflect.DeepEqual(e, want) {
			t.Fatalf("entry %d:\n got %+v\nwant %+v", j, e, want)
		}
	}
	// the filters: a model is the requested or the routed one
	for _, c := range []struct {
		f    Filter
		want int
	}{
		{Filter{Model: "normal"}, 4}, {Filter{Model: "m1"}, 1}, {Filter{Team: "team-2"}, 1}, {Filter{Status: 201}, 2},
		{Filter{RequestID: "req-2", Status: 200}, 1}, {Filter{RequestID: "req-2", Status: 201}, 0}, {Filter{Limit: 3}, 3},
	} {
		if es, _ := r.Recent(ctx, c.f); len(es) != c.want {
			t.Errorf("%+v: %d entries, want %d", c.f, len(es), c.want)
		}
	}
}

// TestRingObjects bounds what a full ring keeps for the collector: its
// entries' bytes in chunks, not the entries (about five objects each when
// the ring held them decoded).
func TestRingObjects(t *testing.T) {
	const n = 10000
	objects, bytes := heaptest.Retained(func() any {
		r := NewRing(n)
		for i := range n {
			r.Record(fullEntry(i))
		}
		return r
	})
	t.Logf("a full ring of %d: %d B and %.3f objects an entry", n, bytes/n, float64(objects)/n)
	if per := float64(objects) / n; per > 0.05 {
		t.Errorf("a ring keeps %.3f objects an entry, want <= 0.05", per)
	}
}

// A ring's bytes stay bounded by its live entries: chunks of evicted
// entries go.
func TestRingDropsOldChunks(t *testing.T) {
	r := NewRing(50)
	e := fullEntry(1)
	e.Error = strings.Repeat("x", 4000) // about 4.6 KB an entry: 14 entries a chunk
	for i := range 1000 {
		e.RequestID = fmt.Sprint(i)
		c := *e
		r.Record(&c)
	}
	if n := len(r.chunks); n > 50*4700/ringChunk+2 {
		t.Fatalf("%d chunks held for 50 entries of 4 KB", n)
	}
	if es, _ := r.Lookup(context.Background(), "950"); len(es) != 1 {
		t.Fatal("a live entry must be found")
	}
	if es, _ := r.Lookup(context.Background(), "949"); len(es) != 0 {
		t.Fatal("an evicted entry must be gone")
	}
	big := fullEntry(2)
	big.Error = strings.Repeat("y", 2*ringChunk) // larger than a chunk: one of its own
	r.Record(big)
	if es, _ := r.Lookup(context.Background(), "req-2"); len(es) != 1 || len(es[0].Error) != 2*ringChunk {
		t.Fatal("an entry larger than a chunk must be kept whole")
	}
}

// The stream's writer sends the ring's bytes of a recorded entry, and
// encodes an entry no ring recorded.
func TestQueueSendsTheRingsBytes(t *testing.T) {
	mr := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer c.Close()
	ring := NewRing(10)
	a := NewRedisAudit(c, "sy:", 100, ring)
	recorded, other := fullEntry(1), fullEntry(2)
	ring.Record(recorded)
	ctx := context.Background()
	if _, err := c.Pipelined(ctx, func(p redis.Pipeliner) error { a.Queue(ctx, p, []*Entry{recorded, other}); return nil }); err != nil {
		t.Fatal(err)
	}
	msgs, err := c.XRange(ctx, "sy:{audit}:stream", "-", "+").Result()
	if err != nil || len(msgs) != 2 {
		t.Fatalf("%v %v", msgs, err)
	}
	if got := msgs[0].Values["entry"]; got != string(recorded.raw) {
		t.Fatalf("sent %v, the ring holds %s", got, recorded.raw)
	}
	if got := msgs[1].Values["entry"]; got != string(other.AppendJSON(nil)) {
		t.Fatalf("sent %v", got)
	}
}

// Records and reads at once (run with -race).
func TestRingConcurrent(t *testing.T) {
	r := NewRing(100)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 500 {
				r.Record(fullEntry(g*1000 + i))
			}
		})
		wg.Go(func() {
			for range 50 {
				es, _ := r.Recent(context.Background(), Filter{Model: "normal", Limit: 100})
				for _, e := range es {
					if e.RequestedModel != "normal" {
						t.Error("a wrong entry")
					}
				}
			}
		})
	}
	wg.Wait()
}
