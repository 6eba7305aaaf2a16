package telemetry

import (
	"context"
	"encoding/json"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"switchyard/redact"
)

// StreamClient is the part of go-redis the shared audit log reads with.
type StreamClient interface {
	XRevRangeN(ctx context.Context, stream, start, stop string, count int64) *redis.XMessageSliceCmd
}

// RedisAudit is the shared audit log (SPEC 12.2): entries in one bounded
// Redis stream (capped near audit.max_entries), readable from any replica,
// plus this node's ring. It does not write by itself: the node's one
// background writer (package edge) queues a batch of entries with Queue into
// its pipeline. A lookup reads this node's ring and then walks the stream
// from its newest end a page at a time: admin lookups are rare, requests are
// not, so the cost sits on the lookup.
type RedisAudit struct {
	// Immutable after construction.
	c          StreamClient
	stream     string
	maxEntries int64
	ttl        time.Duration
	local      *Ring
}

// NewRedisAudit returns the shared audit log under prefix, with local as
// this node's copy.
func NewRedisAudit(c StreamClient, prefix string, maxEntries int, local *Ring) *RedisAudit {
	return &RedisAudit{c: c, stream: prefix + "{audit}:stream", maxEntries: int64(max(1, maxEntries)), ttl: 7 * 24 * time.Hour, local: local}
}

// Queue adds the XADDs of entries (and a refresh of the stream's TTL) to p
// and returns their commands. Each entry is a stream record of its own,
// with its request id, team, models and status as fields for filtering:
// nothing is ever overwritten.
func (a *RedisAudit) Queue(ctx context.Context, p redis.Pipeliner, entries []*Entry) []redis.Cmder {
	out := make([]redis.Cmder, 0, len(entries)+1)
	// one value array for the whole batch, sliced per entry; an entry's
	// bytes are the ring's (every node records before it queues), or for
	// one no ring recorded, a slice of buf (which keeps its bytes when
	// buf grows past it)
	var buf []byte
	vals := make([]any, 12*len(entries))
	for i, e := range entries {
		raw := e.raw // the ring's copy, when this node's ring recorded it
		if raw == nil {
			start := len(buf)
			buf = e.AppendJSON(buf)
			raw = buf[start:len(buf):len(buf)]
		}
		v := vals[12*i : 12*i+12 : 12*i+12]
		// the client-chosen fields masked as in the entry (SPEC 15): a key
		// pasted into X-Request-Id or the model must not sit in Redis in clear
		v[0], v[1], v[2], v[3] = "id", redact.Credentials(e.RequestID), "team", e.Team
		v[4], v[5], v[6], v[7] = "model", redact.Credentials(e.RequestedModel), "routed", e.RoutedModel
		v[8], v[9], v[10], v[11] = "status", strconv.Itoa(e.Status), "entry", raw
		out = append(out, p.XAdd(ctx, &redis.XAddArgs{Stream: a.stream, MaxLen: a.maxEntries, Approx: true, Values: v}))
	}
	out = append(out, p.Expire(ctx, a.stream, a.ttl))
	return out
}

// Lookup implements AuditLog: every entry with the id in the shared stream
// (this node's ring answers while Redis is unreachable).
func (a *RedisAudit) Lookup(ctx context.Context, id string) ([]*Entry, error) {
	return a.Recent(ctx, Filter{RequestID: id, Limit: maxLimit})
}

// Recent implements AuditLog: a walk of the stream from its newest end,
// bounded by its length, unmarshalling only the records that match. When
// the stream cannot be read or has no match, this node's ring answers.
//
// A record whose entry is byte for byte one already read is skipped: the
// writer sends a failed round again as it was, and a round whose reply was
// lost had been applied, so its entries are in the stream twice. Two
// requests never write the same bytes (an entry holds its time to the
// nanosecond and its request id), and reading is where the rare duplicate
// costs least: a write made idempotent in Redis (a script per batch) cost
// every request's XADD its arguments' trip through Lua.
func (a *RedisAudit) Recent(ctx context.Context, f Filter) ([]*Entry, error) {
	lim := f.limit()
	const page = 1000
	var out []*Entry
	var seen map[string]bool // the matching entries' bytes, made with the first
	end := "+"
	mf := f.masked() // the records hold the masked values (Queue, AppendJSON)
	for read := int64(0); read <= a.maxEntries+page; read += page {
		msgs, err := a.c.XRevRangeN(ctx, a.stream, end, "-", page).Result()
		if err != nil {
			if read == 0 {
				return a.local.Recent(ctx, f)
			}
			return out, err
		}
		for _, m := range msgs {
			if !fieldsMatch(&mf, m.Values) {
				continue
			}
			raw, _ := m.Values["entry"].(string)
			if seen[raw] {
				continue // a resend's copy (newest first: the copy is the one read later)
			}
			e := new(Entry)
			if err := json.Unmarshal([]byte(raw), e); err != nil || !mf.Match(e) {
				continue
			}
			if seen == nil {
				seen = make(map[string]bool, lim)
			}
			seen[raw] = true
			out = append(out, e)
			if len(out) == lim {
				return out, nil
			}
		}
		if len(msgs) < page {
			break
		}
		end = "(" + msgs[len(msgs)-1].ID
	}
	if len(out) == 0 {
		// not in the stream (yet): this node's entries of the last flush
		// interval, or a stream lost with a Redis restart
		return a.local.Recent(ctx, f)
	}
	return out, nil
}

// fieldsMatch checks the record's plain fields before its entry is decoded.
func fieldsMatch(f *Filter, v map[string]any) bool {
	s := func(k string) string { x, _ := v[k].(string); return x }
	return (f.RequestID == "" || s("id") == f.RequestID) &&
		(f.Team == "" || s("team") == f.Team) &&
		(f.Model == "" || s("model") == f.Model || s("routed") == f.Model) &&
		(f.Status == 0 || s("status") == strconv.Itoa(f.Status))
}

var _ AuditLog = (*RedisAudit)(nil)
