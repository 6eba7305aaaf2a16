package telemetry

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// A client chooses its X-Request-Id and the model it names. The audit
// entry masks a credential pasted into either (SPEC 15: audit entries are
// scrubbed of anything shaped like a credential; AppendJSON), yet:
//   - GET /admin/requests/{id} with the id the client was answered
//     (X-Request-Id is echoed back exactly, SPEC 12.2, 15) must still find
//     the entry, from the ring and from the shared stream;
//   - the shared stream's plain filter fields must not hold the value in
//     clear either: they sit in Redis for a week next to the masked entry.
func TestHostile5AuditCredentialShapedIDs(t *testing.T) {
	const key = "sk-proj-Zq3xV8mN2pL7rT4wY9kH6cB1"
	id, model := "req-"+key, key
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	newEntry := func() *Entry {
		return &Entry{RequestID: id, Team: "t", RequestedModel: model, Status: 404, Time: time.Now(), Operation: "chat"}
	}

	t.Run("ring", func(t *testing.T) {
		r := NewRing(10)
		r.Record(newEntry())
		for _, f := range []Filter{{RequestID: id}, {Model: model}, {RequestID: id, Team: "t", Status: 404}} {
			got, _ := r.Recent(ctx, f)
			if len(got) != 1 {
				t.Errorf("filter %+v: %d entries, want the one recorded", f, len(got))
			}
		}
		if got, _ := r.Lookup(ctx, id); len(got) != 1 {
			t.Fatalf("Lookup by the id the client was answered: %d entries, want 1", len(got))
		}
		if got, _ := r.Lookup(ctx, "req-sk-proj-other0000000000000000000"); len(got) != 0 {
			t.Errorf("another credential-shaped id found %d entries", len(got))
		}
	})

	t.Run("stream", func(t *testing.T) {
		mr := miniredis.RunT(t)
		c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
		defer c.Close()
		// the writer's node recorded it; another replica (an empty ring) reads
		a := NewRedisAudit(c, "sy:", 100, NewRing(10))
		e := newEntry()
		a.local.Record(e)
		if _, err := c.Pipelined(ctx, func(p redis.Pipeliner) error { a.Queue(ctx, p, []*Entry{e}); return nil }); err != nil {
			t.Fatal(err)
		}
		msgs, err := c.XRange(ctx, "sy:{audit}:stream", "-", "+").Result()
		if err != nil || len(msgs) != 1 {
			t.Fatalf("stream: %v %v", msgs, err)
		}
		for k, v := range msgs[0].Values {
			if s, _ := v.(string); strings.Contains(s, key[6:]) {
				t.Errorf("stream field %s holds the client's credential in clear: %q", k, s)
			}
		}
		b := NewRedisAudit(c, "sy:", 100, NewRing(10))
		if got, err := b.Lookup(ctx, id); err != nil || len(got) != 1 {
			t.Fatalf("another replica's Lookup by the id the client was answered: %d entries, %v; want 1", len(got), err)
		}
		if got, _ := b.Recent(ctx, Filter{Model: model}); len(got) != 1 {
			t.Errorf("another replica's filter by the model named: %d entries, want 1", len(got))
		}
	})
}
