package telemetry

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

func TestRingEvictsOldest(t *testing.T) {
	r := NewRing(3)
	ctx := context.Background()
	for i := 0; i < 5; i++ {
		r.Record(&Entry{RequestID: fmt.Sprint(i)})
	}
	for i, want := range []bool{false, false, true, true, true} {
		if _, ok, _ := r.Get(ctx, fmt.Sprint(i)); ok != want {
			t.Errorf("entry %d present=%v want %v", i, ok, want)
		}
	}
	// a reused request id keeps the newest entry findable after eviction of the old one
	r.Record(&Entry{RequestID: "3", Status: 500})
	if e, ok, _ := r.Get(ctx, "3"); !ok || e.Status != 500 {
		t.Fatalf("reused id: %+v %v", e, ok)
	}
}

func TestRedisAuditSharedAndFlushed(t *testing.T) {
	mr := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer c.Close()
	dropped := 0
	a := NewRedisAudit(c, "sy:", 100, NewRing(10), func(n int) { dropped += n })
	b := NewRedisAudit(c, "sy:", 100, NewRing(10), func(n int) { dropped += n })
	for i := 0; i < 250; i++ {
		a.Record(&Entry{RequestID: fmt.Sprintf("r%d", i), Team: "t", Time: time.Now()})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// another replica reads an entry it never saw
	e, ok, err := b.Get(ctx, "r240")
	if err != nil || !ok || e.Team != "t" {
		t.Fatalf("shared lookup: %+v %v %v", e, ok, err)
	}
	if n, _ := c.XLen(ctx, "sy:{audit}:stream").Result(); n < 100 || n > 250 {
		t.Fatalf("stream must be bounded near max_entries: %d", n)
	}
	if ttl := mr.TTL("sy:{audit}:stream"); ttl <= 0 {
		t.Fatal("the stream must carry a TTL")
	}
	// an entry older than the newest page is still found (paged walk)
	if _, ok, err := b.Get(ctx, "r160"); !ok || err != nil {
		t.Fatalf("paged lookup: %v %v", ok, err)
	}
	if _, ok, _ := b.Get(ctx, "nope"); ok {
		t.Fatal("unknown id found")
	}
	if dropped != 0 {
		t.Fatalf("%d entries dropped", dropped)
	}
	_ = b.Close(ctx)
}

func TestMetricsRegister(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	m.SmartRequests.WithLabelValues("normal", "hard").Inc()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, mf := range mfs {
		names[mf.GetName()] = true
	}
	for _, want := range []string{"switchyard_smartroute_requests_total", "switchyard_redis_up", "go_goroutines", "process_cpu_seconds_total"} {
		if !names[want] {
			t.Errorf("metric %s not registered", want)
		}
	}
}
