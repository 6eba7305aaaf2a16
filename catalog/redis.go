package catalog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisClient is the part of go-redis the shared catalog store uses.
type RedisClient interface {
	redis.Scripter
	Get(ctx context.Context, key string) *redis.StringCmd
	MGet(ctx context.Context, keys ...string) *redis.SliceCmd
	StrLen(ctx context.Context, key string) *redis.IntCmd
	Subscribe(ctx context.Context, channels ...string) *redis.PubSub
}

// RedisStore keeps the State in Redis, shared by every replica (SPEC 9,
// 11). A save is one script: compare the stored version with the base,
// write state and version, publish the new version on the change channel,
// so a reader sees the old state or the new one and every replica hears of
// it. The two keys share the {catalog} hash tag. They carry no TTL on
// purpose: the catalog is the operator's configuration, not a cache.
type RedisStore struct {
	c          RedisClient
	versionKey string
	stateKey   string
	channel    string
	timeout    time.Duration
	seen       atomic.Int64 // the largest state read or written, bytes
}

// NewRedisStore returns the shared store under prefix. timeout bounds each
// call (admin writes are not on the request path, so it is generous).
func NewRedisStore(c RedisClient, prefix string, timeout time.Duration) *RedisStore {
	return &RedisStore{
		c: c, versionKey: prefix + "{catalog}:version", stateKey: prefix + "{catalog}:state",
		channel: prefix + "catalog:changed", timeout: timeout,
	}
}

// Channel is the pub/sub channel carrying change notices (the new version).
func (r *RedisStore) Channel() string { return r.channel }

var saveScript = redis.NewScript(`
local v = tonumber(redis.call('GET', KEYS[1]) or '0')
if v ~= tonumber(ARGV[1]) then return v end
redis.call('SET', KEYS[1], ARGV[2])
redis.call('SET', KEYS[2], ARGV[3])
redis.call('PUBLISH', ARGV[4], ARGV[2])
return -1
`)

// bulkPerSecond is the pace a whole catalog is assumed to move at at the
// least (encoded, sent, stored, or read and decoded): with 100,000 keys the
// state is some 30 MB, which one second does not always carry on a busy
// node. Load and Save wait r.timeout plus a second per bulkPerSecond of
// state (Load asks Redis for its size first); both are off the request
// path (start, admin writes, the watcher).
const bulkPerSecond = 16 << 20

// bulkTimeout is r.timeout plus the time n bytes of state may take.
func (r *RedisStore) bulkTimeout(n int) time.Duration {
	return r.timeout + time.Duration(n)*time.Second/bulkPerSecond
}

// Load implements Store.
func (r *RedisStore) Load(ctx context.Context) (*State, bool, error) {
	// its size first (cheap), so the read is given the time it needs
	sctx, scancel := context.WithTimeout(ctx, r.timeout)
	n, err := r.c.StrLen(sctx, r.stateKey).Result()
	scancel()
	if err != nil {
		return nil, false, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	ctx, cancel := context.WithTimeout(ctx, r.bulkTimeout(int(max(n, r.seen.Load()))))
	defer cancel()
	vals, err := r.c.MGet(ctx, r.versionKey, r.stateKey).Result()
	if err != nil {
		return nil, false, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	raw, ok := vals[1].(string)
	if !ok || raw == "" {
		return nil, false, nil
	}
	if n := int64(len(raw)); n > r.seen.Load() {
		r.seen.Store(n)
	}
	var st State
	if err := json.Unmarshal([]byte(raw), &st); err != nil {
		return nil, false, fmt.Errorf("catalog in Redis (%s) is corrupt: %v", r.stateKey, err)
	}
	st.pack()
	return &st, true, nil
}

// loadNewer is Load when the stored version is past have, and nothing
// (ok false) otherwise: the poll asks for the version alone, so an
// unchanged catalog (10,000 teams are megabytes of JSON) is neither sent by
// Redis nor decoded by every replica every poll interval.
func (r *RedisStore) loadNewer(ctx context.Context, have int64) (*State, bool, error) {
	cctx, cancel := context.WithTimeout(ctx, r.timeout)
	v, err := r.c.Get(cctx, r.versionKey).Int64()
	cancel()
	if errors.Is(err, redis.Nil) || (err == nil && v <= have) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return r.Load(ctx)
}

// Save implements Store.
func (r *RedisStore) Save(ctx context.Context, base int64, next *State) error {
	b, err := encodeState(next, int(r.seen.Load())+4096)
	if err != nil {
		return err
	}
	if n := int64(len(b)); n > r.seen.Load() {
		r.seen.Store(n)
	}
	ctx, cancel := context.WithTimeout(ctx, r.bulkTimeout(len(b)))
	defer cancel()
	res, err := saveScript.Run(ctx, r.c, []string{r.versionKey, r.stateKey},
		base, strconv.FormatInt(next.Version, 10), b, r.channel).Int64()
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	if res != -1 {
		return ErrConflict
	}
	return nil
}

// Watch reloads the catalog whenever another replica publishes a change,
// and every poll interval as a backstop for notices missed while
// disconnected. apply receives each newer state. ready is called once the
// subscription is confirmed (or has failed: the poll still runs), after a
// reload that catches changes made before it. Watch returns when ctx ends.
func (r *RedisStore) Watch(ctx context.Context, current func() int64, apply func(*State), poll time.Duration, ready func()) {
	sub := r.c.Subscribe(ctx, r.channel)
	defer sub.Close()
	rctx, cancel := context.WithTimeout(ctx, time.Second)
	_, _ = sub.Receive(rctx) // the subscription confirmation
	cancel()
	msgs := sub.Channel()
	tick := time.NewTicker(poll)
	defer tick.Stop()
	reload := func() {
		st, ok, err := r.loadNewer(ctx, current())
		if err != nil || !ok || st.Version <= current() {
			return
		}
		apply(st)
	}
	reload()
	ready()
	for {
		select {
		case <-ctx.Done():
			return
		case m, ok := <-msgs:
			if !ok {
				return
			}
			if v, err := strconv.ParseInt(m.Payload, 10, 64); err == nil && v <= current() {
				continue
			}
			reload()
		case <-tick.C:
			reload()
		}
	}
}

var _ Store = (*RedisStore)(nil)
