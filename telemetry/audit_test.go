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

func TestRingEvictsOldestNeverOverwrites(t *testing.T) {
	r := NewRing(3)
	ctx := context.Background()
	for i := 0; i < 5; i++ {
		r.Record(&Entry{RequestID: fmt.Sprint(i)})
	}
	for i, want := range []int{0, 0, 1, 1, 1} {
		if es, _ := r.Lookup(ctx, fmt.Sprint(i)); len(es) != want {
			t.Errorf("entry %d: %d found, want %d", i, len(es), want)
		}
	}
	// a reused request id (another team's) lists both entries, newest first
	r.Record(&Entry{RequestID: "3", Team: "other", Status: 500})
	es, _ := r.Lookup(ctx, "3")
	if len(es) != 2 || es[0].Status != 500 || es[1].Team != "" {
		t.Fatalf("reused id: %+v", es)
	}
	if got, _ := r.Recent(ctx, Filter{Team: "other"}); len(got) != 1 {
		t.Fatalf("team filter: %d", len(got))
	}
}

func TestRedisAuditSharedAndBounded(t *testing.T) {
	mr := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer c.Close()
	a := NewRedisAudit(c, "sy:", 100, NewRing(10))
	b := NewRedisAudit(c, "sy:", 100, NewRing(10))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var es []*Entry
	for i := 0; i < 250; i++ {
		es = append(es, &Entry{RequestID: fmt.Sprintf("r%d", i), Team: "t", Status: 200, RequestedModel: "m", Time: time.Now()})
	}
	if _, err := c.Pipelined(ctx, func(p redis.Pipeliner) error { a.Queue(ctx, p, es); return nil }); err != nil {
		t.Fatal(err)
	}
	// another replica reads an entry it never saw
	got, err := b.Lookup(ctx, "r240")
	if err != nil || len(got) != 1 || got[0].Team != "t" || got[0].RequestID != "r240" {
		t.Fatalf("shared lookup: %+v %v", got, err)
	}
	if n, _ := c.XLen(ctx, "sy:{audit}:stream").Result(); n < 100 || n > 250 {
		t.Fatalf("stream must be bounded near max_entries: %d", n)
	}
	if ttl := mr.TTL("sy:{audit}:stream"); ttl <= 0 {
		t.Fatal("the stream must carry a TTL")
	}
	if got, _ := b.Lookup(ctx, "nope"); len(got) != 0 {
		t.Fatal("unknown id found")
	}
	recent, err := b.Recent(ctx, Filter{Model: "m", Status: 200, Limit: 5})
	if err != nil || len(recent) != 5 {
		t.Fatalf("recent: %d %v", len(recent), err)
	}
	for i, e := range recent { // each record decodes to its own entry (one buffer per batch)
		if want := fmt.Sprintf("r%d", 249-i); e.RequestID != want {
			t.Fatalf("recent[%d] is %s, want %s", i, e.RequestID, want)
		}
	}
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

// TestRedisAuditResendListedOnce: the writer sends a round whose pipeline
// failed again as it was; when the first send had been applied (its reply
// lost), the stream holds those entries twice. A read lists each once,
// newest first, and a filter still finds the entry; distinct entries of one
// request id (a client may reuse X-Request-Id) stay distinct.
func TestRedisAuditResendListedOnce(t *testing.T) {
	mr := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer c.Close()
	a := NewRedisAudit(c, "sy:", 100, NewRing(10))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	t0 := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	round := []*Entry{
		{RequestID: "r1", Team: "t", Status: 200, RequestedModel: "m", Time: t0},
		{RequestID: "r2", Team: "t", Status: 200, RequestedModel: "m", Time: t0.Add(time.Millisecond)},
		{RequestID: "r2", Team: "t", Status: 429, RequestedModel: "m", Time: t0.Add(2 * time.Millisecond)}, // the id reused
	}
	for range 2 { // the round, then its resend
		if _, err := c.Pipelined(ctx, func(p redis.Pipeliner) error { a.Queue(ctx, p, round); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if n, _ := c.XLen(ctx, "sy:{audit}:stream").Result(); n != 6 {
		t.Fatalf("the stream holds %d records, want the round twice (6)", n)
	}
	got, err := a.Recent(ctx, Filter{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range got {
		ids = append(ids, fmt.Sprintf("%s/%d", e.RequestID, e.Status))
	}
	if fmt.Sprint(ids) != "[r2/429 r2/200 r1/200]" {
		t.Fatalf("listed %v, want each entry once, newest first", ids)
	}
	if got, _ := a.Lookup(ctx, "r1"); len(got) != 1 {
		t.Fatalf("lookup r1: %d entries, want 1", len(got))
	}
}
