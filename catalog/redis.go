package catalog

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net"
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

// ErrSaveUnknown is returned by RedisStore.Save when the save's reply was
// lost (a timeout or a cut connection after the script may have run) and
// the read that follows could not tell whether it landed: the change may
// be live. It is not ErrUnavailable, which says nothing was changed.
var ErrSaveUnknown = errors.New("catalog store did not confirm the save, and reading it back failed: the change may have been applied")

// RedisStore keeps the State in Redis, shared by every replica (SPEC 9,
// 11). A save is one script: compare the stored version with the base,
// write state and version, publish the new version on the change channel,
// so a reader sees the old state or the new one and every replica hears of
// it. The script also writes the save's own random token, so a save whose
// reply was lost can find out whether it landed (Save), and a resent one
// (go-redis retries on a cut connection) is not taken for a concurrent
// change. The keys share the {catalog} hash tag. They carry no TTL on
// purpose: the catalog is the operator's configuration, not a cache.
type RedisStore struct {
	// immutable after NewRedisStore
	c          RedisClient
	versionKey string
	stateKey   string
	savedKey   string // the token of the last save
	channel    string
	timeout    time.Duration

	seen atomic.Int64 // the largest state read or written, bytes
}

// NewRedisStore returns the shared store under prefix. timeout bounds each
// call (admin writes are not on the request path, so it is generous).
func NewRedisStore(c RedisClient, prefix string, timeout time.Duration) *RedisStore {
	return &RedisStore{
		c: c, versionKey: prefix + "{catalog}:version", stateKey: prefix + "{catalog}:state",
		savedKey: prefix + "{catalog}:saved", channel: prefix + "catalog:changed", timeout: timeout,
	}
}

// Channel is the pub/sub channel carrying change notices (the new version).
func (r *RedisStore) Channel() string { return r.channel }

// saveScript: KEYS version, state, saved token; ARGV base, version, state,
// channel, token. A save already applied under the same token (the same
// call resent after its reply was lost) answers as it did the first time.
var saveScript = redis.NewScript(`
if redis.call('GET', KEYS[3]) == ARGV[5] then return -1 end
local v = tonumber(redis.call('GET', KEYS[1]) or '0')
if v ~= tonumber(ARGV[1]) then return v end
redis.call('SET', KEYS[1], ARGV[2])
redis.call('SET', KEYS[2], ARGV[3])
redis.call('SET', KEYS[3], ARGV[5])
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
	token := rand.Text()
	sctx, cancel := context.WithTimeout(ctx, r.bulkTimeout(len(b)))
	res, err := saveScript.Run(sctx, r.c, []string{r.versionKey, r.stateKey, r.savedKey},
		base, strconv.FormatInt(next.Version, 10), b, r.channel, token).Int64()
	cancel()
	if err != nil {
		if !mayHaveRun(err) {
			return fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
		return r.landed(ctx, base, next.Version, token, err)
	}
	if res != -1 {
		return ErrConflict
	}
	return nil
}

// mayHaveRun reports whether a failed script call may have run in Redis:
// anything but an error Redis answered or a connection never made (a
// timeout, a connection cut after the call was sent, the caller's context
// ending meanwhile).
func mayHaveRun(err error) bool {
	var re redis.Error
	var oe *net.OpError
	switch {
	case errors.As(err, &re), errors.Is(err, redis.ErrPoolTimeout), errors.Is(err, redis.ErrClosed):
		return false
	case errors.As(err, &oe) && oe.Op == "dial":
		return false
	}
	return true
}

// landed finds out, in one read bounded by r.timeout, whether the save of
// version under token whose reply was lost (cause) took effect, so the
// admin API answers what happened (SPEC 11) instead of "nothing was
// changed" for a change that is live: nil when the stored token is this
// save's (it landed; a later save on top of it was based on it),
// ErrUnavailable when the version is still base (nothing changed),
// ErrConflict when another writer's version up to this one is stored
// (this change is not in it, and is to be recomputed on the newer state),
// and ErrSaveUnknown otherwise: the read failed, or a newer version hides
// whether this one came first. It reads even when the caller's context
// has ended: a change that landed is published on this node too.
func (r *RedisStore) landed(ctx context.Context, base, version int64, token string, cause error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.timeout)
	defer cancel()
	vals, err := r.c.MGet(ctx, r.versionKey, r.savedKey).Result()
	if err != nil {
		return fmt.Errorf("%w (saving: %v; reading back: %v)", ErrSaveUnknown, cause, err)
	}
	stored, _ := vals[0].(string)
	saved, _ := vals[1].(string)
	v, perr := strconv.ParseInt(stored, 10, 64)
	if stored == "" {
		v, perr = 0, nil
	}
	switch {
	case saved == token:
		return nil
	case perr != nil:
		return fmt.Errorf("%w (saving: %v; stored version %q)", ErrSaveUnknown, cause, stored)
	case v == base:
		return fmt.Errorf("%w: %v", ErrUnavailable, cause)
	case v <= version:
		return ErrConflict
	}
	return fmt.Errorf("%w (saving: %v; a newer version %d is stored)", ErrSaveUnknown, cause, v)
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
