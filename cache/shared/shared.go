// Package shared is the response cache's cluster-wide administration in
// Redis (SPEC 18): a purge that reaches every replica (a record of it, a
// notice on a channel, and the shared entries removed in bounded SCAN
// batches) and the counters every node adds to, summed on read. The
// entries themselves are read and written by the edge state (Begin and its
// writer); this package only finds them by name: <prefix>{team:<team>}:
// followed by edge.CacheKey's "rc:<model>:<64 hex>".
//
// It imports go-redis, cluster (the key layout), edge (the entry names)
// and cache (the counters' types); never gin or gateway.
package shared

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"switchyard/cache"
	"switchyard/cluster"
	"switchyard/edge"
)

// Client is the part of go-redis the store uses.
type Client interface {
	HSet(ctx context.Context, key string, values ...any) *redis.IntCmd
	HGetAll(ctx context.Context, key string) *redis.MapStringStringCmd
	Scan(ctx context.Context, cursor uint64, match string, count int64) *redis.ScanCmd
	Pipeline() redis.Pipeliner
	Subscribe(ctx context.Context, channels ...string) *redis.PubSub
	Publish(ctx context.Context, channel string, message any) *redis.IntCmd
	TxPipeline() redis.Pipeliner
}

// Store is one node's handle on the shared cache administration.
type Store struct {
	// immutable after New
	c        Client
	prefix   string
	purged   string // hash: team \x00 model -> unix ms of the latest purge of that scope
	stats    string // hash: team \x00 model \x00 counter -> count
	channel  string // purge notices: team \x00 model \x00 unix ms
	timeout  time.Duration
	batch    int64
	forEach  func(ctx context.Context, fn func(ctx context.Context, c Client) error) error
	statsTTL time.Duration
}

// Config tunes a Store; zero fields take their defaults.
type Config struct {
	Prefix  string        // redis.key_prefix
	Timeout time.Duration // bounds each Redis call (default 1s)
	// Batch is the keys one SCAN step asks for and one UNLINK removes
	// (default 500): a purge of a million entries is many short calls,
	// never one that blocks Redis.
	Batch int64
	// StatsTTL is how long the shared counters live after their last
	// update (default 30 days).
	StatsTTL time.Duration
}

// New returns the store over c. On Redis Cluster (a *redis.ClusterClient)
// a purge scans every master.
func New(c redis.UniversalClient, cfg Config) *Store {
	if cfg.Timeout <= 0 {
		cfg.Timeout = time.Second
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 500
	}
	if cfg.StatsTTL <= 0 {
		cfg.StatsTTL = 30 * 24 * time.Hour
	}
	s := &Store{c: c, prefix: cfg.Prefix, purged: cfg.Prefix + "{cache}:purged", stats: cfg.Prefix + "{cache}:stats",
		channel: cfg.Prefix + "cache:purged", timeout: cfg.Timeout, batch: cfg.Batch, statsTTL: cfg.StatsTTL}
	s.forEach = func(ctx context.Context, fn func(context.Context, Client) error) error { return fn(ctx, c) }
	if cc, ok := c.(*redis.ClusterClient); ok {
		s.forEach = func(ctx context.Context, fn func(context.Context, Client) error) error {
			return cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return fn(ctx, m) })
		}
	}
	return s
}

func scopeField(team, model string) string { return team + "\x00" + model }

// Purge removes the shared entries of team ("" every team), of one of its
// models when model is set, stored at or before at. First it records the
// purge and announces it, so every node drops its own copies and refuses
// any copy left (an entry a writer sends after the scan, or one a failed
// scan missed) by its stored time; then it unlinks the entries in batches
// and resets the entry counts of the scope. keep is how long the record
// must outlive the entries (the longest cache TTL). It returns how many
// entries it removed in Redis.
func (s *Store) Purge(ctx context.Context, team, model string, at time.Time, keep time.Duration) (int, error) {
	ms := strconv.FormatInt(at.UnixMilli(), 10)
	cctx, cancel := context.WithTimeout(ctx, s.timeout)
	p := s.c.TxPipeline()
	p.HSet(cctx, s.purged, scopeField(team, model), ms)
	p.Expire(cctx, s.purged, max(keep, time.Hour))
	_, err := p.Exec(cctx)
	if err == nil { // apart from the MULTI: a channel is no key of the {cache} slot
		err = s.c.Publish(cctx, s.channel, scopeField(team, model)+"\x00"+ms).Err()
	}
	cancel()
	if err != nil {
		return 0, fmt.Errorf("recording the purge: %w", err)
	}
	removed, err := s.unlink(ctx, s.pattern(team, model))
	if err != nil {
		return removed, err
	}
	return removed, s.resetEntries(ctx, team, model)
}

// pattern is the SCAN MATCH pattern of the entries a purge removes.
func (s *Store) pattern(team, model string) string {
	switch {
	case team == "":
		return globEscape(s.prefix) + "{team:*}:" + globEscape(edge.CacheKeyPrefix) + "*"
	case model == "":
		return globEscape(cluster.TeamKey(s.prefix, team, edge.CacheKeyPrefix)) + "*"
	}
	// exactly 64 hex digits after the model, so "m" never matches "m:x"'s
	return globEscape(cluster.TeamKey(s.prefix, team, edge.CacheKey(model, ""))) + strings.Repeat("?", 64)
}

// globEscape quotes the characters SCAN's MATCH reads as a pattern.
func globEscape(s string) string {
	if !strings.ContainsAny(s, `*?[]\`) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// unlink removes every key matching pattern, a batch per SCAN step, each
// call bounded by the timeout; ctx bounds the whole walk. On Redis Cluster
// the masters are walked concurrently.
func (s *Store) unlink(ctx context.Context, pattern string) (int, error) {
	var removed atomic.Int64
	err := s.forEach(ctx, func(ctx context.Context, c Client) error {
		var cursor uint64
		for {
			cctx, cancel := context.WithTimeout(ctx, s.timeout)
			keys, next, err := c.Scan(cctx, cursor, pattern, s.batch).Result()
			if err == nil && len(keys) > 0 {
				var n int
				n, err = unlinkBySlot(cctx, c, keys)
				removed.Add(int64(n))
			}
			cancel()
			if err != nil {
				return fmt.Errorf("removing the shared entries: %w", err)
			}
			if cursor = next; cursor == 0 {
				return nil
			}
		}
	})
	return int(removed.Load()), err
}

// unlinkEntriesLua removes the keys that hold an entry and leaves those
// that hold a coalescing lease (edge.LeaseMark: the lease lives in its
// entry's key until the entry replaces it), so a purge counts entries only
// and never cuts a leader's followers loose. It returns how many it
// removed.
const unlinkEntriesLua = `
local n = 0
for _, k in ipairs(KEYS) do
  if redis.call('GETRANGE', k, 0, 0) ~= '\0' then n = n + redis.call('UNLINK', k) end
end
return n`

// unlinkBySlot removes the entries among keys in one round trip, one
// script per hash slot: a batch of every team's entries spans many slots,
// and Redis Cluster refuses a call whose keys do not share one.
func unlinkBySlot(ctx context.Context, c Client, keys []string) (int, error) {
	bySlot := map[int][]string{}
	for _, k := range keys {
		sl := cluster.Slot(k)
		bySlot[sl] = append(bySlot[sl], k)
	}
	p := c.Pipeline()
	cmds := make([]*redis.Cmd, 0, len(bySlot))
	for _, ks := range bySlot {
		cmds = append(cmds, p.Eval(ctx, unlinkEntriesLua, ks))
	}
	_, err := p.Exec(ctx)
	n := 0
	for _, cmd := range cmds {
		v, _ := cmd.Int()
		n += v
	}
	return n, err
}

// Purges reads every purge on record (a node starting, or its backstop
// poll for notices missed while disconnected).
func (s *Store) Purges(ctx context.Context, fn func(team, model string, at time.Time)) error {
	cctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	m, err := s.c.HGetAll(cctx, s.purged).Result()
	if err != nil {
		return err
	}
	for f, v := range m {
		team, model, ok := strings.Cut(f, "\x00")
		ms, err := strconv.ParseInt(v, 10, 64)
		if ok && err == nil {
			fn(team, model, time.UnixMilli(ms))
		}
	}
	return nil
}

// Watch calls apply with every purge announced from now on, and with every
// purge on record once subscribed and then every poll interval (a backstop
// for notices missed while disconnected). ready is called once the
// subscription is confirmed (or has failed: the poll still runs). It
// returns when ctx ends.
func (s *Store) Watch(ctx context.Context, poll time.Duration, apply func(team, model string, at time.Time), ready func()) {
	sub := s.c.Subscribe(ctx, s.channel)
	defer sub.Close()
	rctx, cancel := context.WithTimeout(ctx, time.Second)
	_, _ = sub.Receive(rctx) // the subscription confirmation
	cancel()
	msgs := sub.Channel()
	_ = s.Purges(ctx, apply)
	ready()
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case m, ok := <-msgs:
			if !ok {
				return
			}
			parts := strings.Split(m.Payload, "\x00")
			if len(parts) != 3 {
				continue
			}
			if ms, err := strconv.ParseInt(parts[2], 10, 64); err == nil {
				apply(parts[0], parts[1], time.UnixMilli(ms))
			}
		case <-tick.C:
			_ = s.Purges(ctx, apply)
		}
	}
}

// The counters' names in the stats hash.
var counterNames = [...]string{"hits", "misses", "coalesced", "bypasses", "entries", "bytes", "saved_tokens", "saved_usd"}

func counterFields(st *cache.Stat) [len(counterNames)]int64 {
	return [...]int64{st.Hits, st.Misses, st.Coalesced, st.Bypasses, st.Entries, st.Bytes, st.SavedTokens, 0}
}

// Add adds a node's counts to the shared ones in one round trip.
func (s *Store) Add(ctx context.Context, ss []cache.Stat) error {
	if len(ss) == 0 {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	p := s.c.TxPipeline()
	for i := range ss {
		st := &ss[i]
		base := scopeField(st.Team, st.Model) + "\x00"
		for j, n := range counterFields(st) {
			if n != 0 {
				p.HIncrBy(cctx, s.stats, base+counterNames[j], n)
			}
		}
		if st.SavedUSD != 0 {
			p.HIncrByFloat(cctx, s.stats, base+"saved_usd", st.SavedUSD)
		}
	}
	p.Expire(cctx, s.stats, s.statsTTL)
	_, err := p.Exec(cctx)
	return err
}

// Stats reads the shared counters, one Stat per team and model.
func (s *Store) Stats(ctx context.Context) ([]cache.Stat, error) {
	cctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	m, err := s.c.HGetAll(cctx, s.stats).Result()
	if err != nil {
		return nil, err
	}
	by := map[[2]string]*cache.Stat{}
	for f, v := range m {
		parts := strings.Split(f, "\x00")
		if len(parts) != 3 {
			continue
		}
		k := [2]string{parts[0], parts[1]}
		st := by[k]
		if st == nil {
			st = &cache.Stat{Team: parts[0], Model: parts[1]}
			by[k] = st
		}
		if parts[2] == "saved_usd" {
			st.SavedUSD, _ = strconv.ParseFloat(v, 64)
			continue
		}
		n, _ := strconv.ParseInt(v, 10, 64)
		switch parts[2] {
		case "hits":
			st.Hits = n
		case "misses":
			st.Misses = n
		case "coalesced":
			st.Coalesced = n
		case "bypasses":
			st.Bypasses = n
		case "entries":
			st.Entries = n
		case "bytes":
			st.Bytes = n
		case "saved_tokens":
			st.SavedTokens = n
		}
	}
	out := make([]cache.Stat, 0, len(by))
	for _, st := range by {
		out = append(out, *st)
	}
	return out, nil
}

// resetEntries zeroes the stored-entry counts of a purged scope (the other
// counters are history and stay).
func (s *Store) resetEntries(ctx context.Context, team, model string) error {
	cctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	m, err := s.c.HGetAll(cctx, s.stats).Result()
	if err != nil {
		return err
	}
	p := s.c.TxPipeline()
	n := 0
	for f := range m {
		parts := strings.Split(f, "\x00")
		if len(parts) != 3 || (parts[2] != "entries" && parts[2] != "bytes") ||
			(team != "" && parts[0] != team) || (model != "" && parts[1] != model) {
			continue
		}
		p.HDel(cctx, s.stats, f)
		n++
	}
	if n == 0 {
		return nil
	}
	_, err = p.Exec(cctx)
	return err
}
