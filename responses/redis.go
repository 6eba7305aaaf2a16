package responses

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"switchyard/cluster"
	"switchyard/wire"
)

// RedisClient is the part of go-redis the shared store uses.
type RedisClient interface {
	Pipelined(ctx context.Context, fn func(redis.Pipeliner) error) ([]redis.Cmder, error)
}

// queueLen bounds the records waiting for the writer; past it a record is
// kept only locally and counted as dropped.
const queueLen = 4096

// writeTimeout bounds one batch write (off the request path).
const writeTimeout = 2 * time.Second

// Redis is the shared store: records and their indexed items live under
// "<prefix>{team:<name>}:resp:" and ":ritem:" with store_ttl, so a
// follow-up on any replica finds them (the team's hash tag keeps a team's
// keys in one Cluster slot).
// Every record is also kept in the bounded local store at once, so a
// follow-up on the same node reads its own write before the writer has
// sent it, and a node whose Redis is gone still serves its own
// conversations. Reads are bounded by the request-path timeout.
type Redis struct {
	// immutable after NewRedis
	c       RedisClient
	prefix  string
	timeout time.Duration
	ttl     time.Duration
	local   *Local
	log     *slog.Logger
	queue   chan job
	stop    chan struct{}
	done    chan struct{}

	dropped atomic.Int64
	closing atomic.Bool
}

type job struct {
	team  string
	rec   *Record
	flush chan struct{} // a flush marker instead of a record
}

// NewRedis returns the shared store writing under prefix (e.g.
// "switchyard:"), reading with timeout, falling back to local.
func NewRedis(c RedisClient, prefix string, timeout time.Duration, cfg Config, local *Local, log *slog.Logger) *Redis {
	if log == nil {
		log = slog.Default()
	}
	r := &Redis{c: c, prefix: prefix, timeout: timeout, ttl: cfg.TTL, local: local, log: log,
		queue: make(chan job, queueLen), stop: make(chan struct{}), done: make(chan struct{})}
	go r.run()
	return r
}

// Keys share the edge state's per-team hash tag ({team:<name>}), so a
// team's responses live in the slot of its limits and pins.
func (r *Redis) recKey(team, id string) string  { return cluster.TeamKey(r.prefix, team, "resp:"+id) }
func (r *Redis) itemKey(team, id string) string { return cluster.TeamKey(r.prefix, team, "ritem:"+id) }

// Dropped reports records that never reached Redis because the queue was full.
func (r *Redis) Dropped() int64 { return r.dropped.Load() }

// Save implements Store: the local copy at once, Redis through the writer.
func (r *Redis) Save(team string, rec *Record) {
	r.local.Save(team, rec)
	if r.closing.Load() {
		return
	}
	select {
	case r.queue <- job{team: team, rec: rec}:
	default:
		r.dropped.Add(1)
		r.log.Warn("response store queue full: response kept on this node only", "response_id", rec.ID)
	}
}

// Load implements Store: local first, then one pipelined read of whatever
// is missing, bounded by the request-path timeout.
func (r *Redis) Load(ctx context.Context, team, prev string, refs []string) (Lookup, error) {
	lk, prevMissing, missing := r.local.lookup(team, prev, refs)
	if !prevMissing && len(missing) == 0 {
		return lk, nil
	}
	cctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	var recCmd *redis.StringCmd
	itemCmds := make([]*redis.StringCmd, len(missing))
	_, err := r.c.Pipelined(cctx, func(p redis.Pipeliner) error {
		if prevMissing {
			recCmd = p.Get(cctx, r.recKey(team, prev))
		}
		for i, id := range missing {
			itemCmds[i] = p.Get(cctx, r.itemKey(team, id))
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return Lookup{}, ErrUnavailable
	}
	if recCmd != nil {
		b, err := recCmd.Bytes()
		if err != nil {
			return Lookup{}, ErrNotFound
		}
		rec := new(Record)
		if json.Unmarshal(b, rec) != nil {
			return Lookup{}, ErrNotFound
		}
		lk.Previous = rec
	}
	for i, c := range itemCmds {
		b, err := c.Bytes()
		if err != nil {
			continue
		}
		var it wire.Item
		if json.Unmarshal(b, &it) == nil {
			if lk.Items == nil {
				lk.Items = make(map[string]wire.Item, len(refs))
			}
			lk.Items[missing[i]] = it
		}
	}
	return lk, nil
}

// Get implements Store.
func (r *Redis) Get(ctx context.Context, team, id string) (*Record, error) {
	lk, err := r.Load(ctx, team, id, nil)
	if err != nil {
		return nil, err
	}
	return lk.Previous, nil
}

// Delete implements Store: the record and the items it indexed, here and
// in Redis.
func (r *Redis) Delete(ctx context.Context, team, id string) (bool, error) {
	rec, err := r.Get(ctx, team, id)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	_, _ = r.local.Delete(ctx, team, id)
	cctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	keys := []string{r.recKey(team, id)}
	for i := max(rec.First, 0); i < len(rec.Items); i++ {
		if it := &rec.Items[i]; it.ID != "" {
			keys = append(keys, r.itemKey(team, it.ID))
		}
	}
	if _, err := r.c.Pipelined(cctx, func(p redis.Pipeliner) error {
		// one DEL per key (a team's keys share a slot; single-key
		// commands keep the pipeline plain on any topology)
		for _, k := range keys {
			p.Del(cctx, k)
		}
		return nil
	}); err != nil {
		return false, ErrUnavailable
	}
	return true, nil
}

// Flush waits until every record saved before it was written (or ctx ends).
func (r *Redis) Flush(ctx context.Context) error {
	ch := make(chan struct{})
	select {
	case r.queue <- job{flush: ch}:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close implements Store: it stops taking records and writes the queued
// ones until ctx ends.
func (r *Redis) Close(ctx context.Context) error {
	if r.closing.Swap(true) {
		return nil
	}
	err := r.Flush(ctx)
	close(r.stop) // the queue stays open: a Save racing Close must not panic
	select {
	case <-r.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	return err
}

// run is the one writer: it takes what is queued (up to 64 records) and
// writes it in one pipeline.
func (r *Redis) run() {
	defer close(r.done)
	batch := make([]job, 0, 64)
	for {
		var j job
		select {
		case j = <-r.queue:
		case <-r.stop:
			return
		}
		batch = append(batch[:0], j)
	more:
		for len(batch) < cap(batch) {
			select {
			case j := <-r.queue:
				batch = append(batch, j)
			default:
				break more
			}
		}
		r.write(batch)
	}
}

func (r *Redis) write(batch []job) {
	n := 0
	ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	defer cancel()
	_, err := r.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, j := range batch {
			if j.rec == nil {
				continue
			}
			b, err := json.Marshal(j.rec)
			if err != nil {
				continue
			}
			n++
			p.Set(ctx, r.recKey(j.team, j.rec.ID), b, r.ttl)
			for i := max(j.rec.First, 0); i < len(j.rec.Items); i++ {
				it := &j.rec.Items[i]
				if it.ID == "" {
					continue
				}
				ib, _ := json.Marshal(it)
				p.Set(ctx, r.itemKey(j.team, it.ID), ib, r.ttl)
			}
		}
		return nil
	})
	if err != nil && n > 0 {
		r.log.Warn("response store write failed: responses kept on this node only", "responses", n, "error", err)
	}
	for _, j := range batch {
		if j.flush != nil {
			close(j.flush)
		}
	}
}

var _ Store = (*Redis)(nil)
