// Package cluster owns the connection to the shared Redis (SPEC 9): it builds
// the go-redis UniversalClient for the configured topology (standalone,
// Sentinel, Cluster) with every call bounded by redis.timeout and a pool
// sized and warmed for the node's concurrency, guards it with circuit
// Breakers (one per node on Cluster, with the slot map reloaded as soon as
// a node stops answering) so a down Redis, or a lost shard, costs nothing
// once detected, counts the live nodes through heartbeats, and names the
// keys so that everything of one team (or one deployment) shares a hash tag
// and therefore one Cluster slot. It imports config and go-redis, never gin,
// routing or catalog; what is stored in Redis is decided by its users.
package cluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"switchyard/config"
)

// DefaultTimeout is redis.timeout when the config leaves it zero (SPEC 13).
const DefaultTimeout = 50 * time.Millisecond

// ErrNotConfigured is returned by NewClient when neither redis.url nor
// redis.addrs is set: the gateway then runs local-only.
var ErrNotConfigured = errors.New("cluster: redis not configured")

// Options tune Connect. The zero value is production: DefaultThreshold,
// DefaultCool, the wall clock and a breaker built here.
type Options struct {
	Threshold int              // consecutive failures that open a breaker; <= 0 means DefaultThreshold
	Cool      time.Duration    // open period before a probe; <= 0 means DefaultCool
	Clock     func() time.Time // nil means time.Now
	// Breaker, when set, is the breaker of a standalone or Sentinel client
	// (tests that drive it by hand), or the summary breaker of a Cluster.
	Breaker *Breaker
	// BulkIO, when set, replaces redis.timeout as the read and write
	// timeout (dials keep redis.timeout): a client for the few large
	// values that are off the request path (the catalog: 30 MB with
	// 100,000 keys), whose transfer takes longer than an admission may.
	BulkIO time.Duration
}

func (o Options) newBreaker() *Breaker { return NewBreaker(o.Threshold, o.Cool, o.Clock) }

// Conn is the node's connection to the shared Redis: the go-redis client for
// the configured topology and the breakers that guard it.
//
//   - redis.url alone: a standalone client (redis:// or rediss://, with the
//     URL's credentials, database and TLS);
//   - redis.addrs with redis.master_name: a Sentinel failover client;
//   - redis.addrs alone: a Cluster client (a single address is a
//     standalone server).
//
// With addrs, credentials and TLS still come from redis.url when both are
// set. Standalone and Sentinel have one breaker; Cluster has one per node,
// and a key is guarded by the breaker of the node that serves its slot (its
// shard's master), so a lost shard sends only its own keys to local state
// (SPEC 9). What the edge layer asks is Available(key); the assembler calls
// Warm before reporting ready and Close at shutdown.
type Conn struct {
	// Client is the shared client. Immutable after Connect.
	Client redis.UniversalClient

	// Immutable after Connect.
	breaker  *Breaker  // standalone/Sentinel: the breaker; Cluster: the summary of the shards
	shards   *shardSet // Cluster only
	poolSize int       // connections per node, opened by Warm
	timeout  time.Duration
}

// NewClient builds the shared Redis client for cfg and the breaker that
// reports its state (Connect with the production Options). On Cluster the
// breaker is the summary of the per-shard breakers (up when every shard is),
// which guard the calls themselves. Prefer Connect, which also offers
// per-key availability and Warm.
func NewClient(cfg config.Redis) (redis.UniversalClient, *Breaker, error) {
	c, err := Connect(cfg, Options{})
	if err != nil {
		return nil, nil, err
	}
	return c.Client, c.breaker, nil
}

// NewClientWithBreaker is NewClient with a caller-built breaker (tests inject
// a clock and a threshold through it).
func NewClientWithBreaker(cfg config.Redis, br *Breaker) (redis.UniversalClient, error) {
	c, err := Connect(cfg, Options{Breaker: br})
	if err != nil {
		return nil, err
	}
	return c.Client, nil
}

// DefaultPoolSize is the connections per Redis node when redis.pool_size is
// 0: 16 per CPU, at least 64. A request-path call holds a connection for one
// round trip (~0.1-0.2 ms on loopback), so 64 connections serve a burst of
// several thousand admissions well inside the 50 ms redis.timeout; go-redis's
// own default (10 per CPU) made a 3,000-admission burst wait for the pool.
func DefaultPoolSize() int { return max(64, 16*runtime.GOMAXPROCS(0)) }

// Connect builds the shared Redis client for cfg (see Conn). It does not
// dial: a Redis that is down at start is a fallback condition, not a
// configuration error; Warm opens the connections.
//
// Every topology gets the same bounds, measured on this machine to matter:
//   - DialTimeout, ReadTimeout and WriteTimeout are redis.timeout, and
//     PoolTimeout half of it (poolWait);
//     and ContextTimeoutEnabled is on, so a caller's deadline is honoured (by
//     default go-redis ignores it and a hung Redis held a call for 5 s);
//   - one dial attempt per call (DialerRetries 1): the default retried dials
//     and a refused port cost 1.7 s per call;
//   - no command retries (MaxRetries -1; MaxRedirects -1 on Cluster, which
//     also retries on network errors): an admission script is not
//     idempotent, and a retry after a timeout could charge it twice. A
//     MOVED reply during resharding therefore fails one call (the caller
//     falls back locally) and triggers a slot-map reload for the next;
//   - redis.pool_size connections per node (DefaultPoolSize when 0), kept
//     open once Warm has opened them (ConnMaxIdleTime -1: a quiet hour must
//     not close them; no MinIdleConns: it re-dials a dead Redis in the
//     background for every lost connection, a dial storm during an outage);
//   - connBuffer read and write buffers per pooled connection.
//
// The breaker is installed as go-redis's Options.Limiter (per node on
// Cluster) with a PING probe of its own; the Sentinel client has no such
// option and gets it as a hook, probing with trial calls.
func Connect(cfg config.Redis, o Options) (*Conn, error) {
	if !cfg.Enabled() {
		return nil, ErrNotConfigured
	}
	t := cfg.Timeout
	if t <= 0 {
		t = DefaultTimeout
	}
	pool := cfg.PoolSize
	if pool <= 0 {
		pool = DefaultPoolSize()
	}
	base := &redis.Options{}
	if cfg.URL != "" {
		u, err := redis.ParseURL(cfg.URL)
		if err != nil {
			// go-redis quotes the URL it was given: never its password (SPEC 15)
			return nil, fmt.Errorf("cluster: parsing redis.url %s: %s", config.RedactURL(cfg.URL), config.RedactIn(err.Error(), cfg.URL))
		}
		base = u
	}
	bound(base, t, pool)
	rw := t
	if o.BulkIO > 0 {
		rw = o.BulkIO
		base.ReadTimeout, base.WriteTimeout = rw, rw
	}
	br := o.Breaker
	if br == nil {
		br = o.newBreaker()
	}
	conn := &Conn{breaker: br, poolSize: pool, timeout: t}

	switch {
	case len(cfg.Addrs) > 0 && cfg.MasterName != "":
		fc := redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName:            cfg.MasterName,
			SentinelAddrs:         cfg.Addrs,
			Username:              base.Username,
			Password:              base.Password,
			DB:                    base.DB,
			TLSConfig:             base.TLSConfig,
			MaxRetries:            base.MaxRetries,
			DialTimeout:           t,
			DialerRetries:         base.DialerRetries,
			ReadTimeout:           rw,
			WriteTimeout:          rw,
			PoolTimeout:           poolWait(t),
			PoolSize:              pool,
			ReadBufferSize:        connBuffer,
			WriteBufferSize:       connBuffer,
			ConnMaxIdleTime:       -1,
			ContextTimeoutEnabled: true,
		})
		fc.AddHook(hook{br}) // no probe: the hook's trials are per command, not per connection
		conn.Client = fc
	case len(cfg.Addrs) > 1:
		s := newShardSet(cfg.Addrs, base, t, o, br)
		cc := redis.NewClusterClient(&redis.ClusterOptions{
			Addrs:                 cfg.Addrs,
			ClusterSlots:          s.loadSlots,
			Username:              base.Username,
			Password:              base.Password,
			TLSConfig:             base.TLSConfig,
			MaxRedirects:          -1,
			MaxRetries:            -1,
			DialTimeout:           t,
			DialerRetries:         base.DialerRetries,
			ReadTimeout:           rw,
			WriteTimeout:          rw,
			PoolTimeout:           poolWait(t),
			PoolSize:              pool,
			ReadBufferSize:        connBuffer,
			WriteBufferSize:       connBuffer,
			ConnMaxIdleTime:       -1,
			ContextTimeoutEnabled: true,
			// No CLIENT MAINT_NOTIFICATIONS handshake: a round trip per new
			// connection for a feature of managed Redis only, and its "auto"
			// fallback rewrites options shared by concurrent handshakes
			// (a data race under Warm).
			MaintNotificationsConfig: noMaint(),
			NewClient: func(no *redis.Options) *redis.Client {
				no.Limiter = s.node(no.Addr).br
				return redis.NewClient(no)
			},
		})
		s.reload = func() { cc.ReloadState(context.Background()) }
		conn.Client, conn.shards = cc, s
	default:
		if len(cfg.Addrs) == 1 {
			base.Addr = cfg.Addrs[0]
		}
		if base.Addr == "" {
			base.Addr = "localhost:6379"
		}
		network := base.Network
		if network == "" {
			network = "tcp"
		}
		base.Limiter = br
		br.SetProbe(pingProbe(redis.NewDialer(base), network, []string{base.Addr}, t))
		conn.Client = redis.NewClient(base)
	}
	return conn, nil
}

// Breaker is the breaker that reports Redis's state (switchyard_redis_up):
// the one breaker of a standalone or Sentinel client; on Cluster a summary,
// up when the master of every slot range is, which guards no call itself.
func (c *Conn) Breaker() *Breaker { return c.breaker }

// Up reports whether shared state is fully available: the breaker is closed,
// or on Cluster every shard's is.
func (c *Conn) Up() bool { return c.breaker.Up() }

// Available reports whether a call on key would go to Redis now, without
// waiting (see Breaker.Available): on Cluster it asks the breaker of the
// node serving key's hash slot, so the keys of a lost shard go local while
// every other key stays shared. Asking also moves recovery on: a breaker
// past its cool period starts its probe, and on Cluster a key whose shard is
// down asks for a slot-map reload (rate-limited), so a promoted replica takes
// over as soon as the cluster knows about it.
func (c *Conn) Available(key string) bool {
	if c.shards == nil {
		return c.breaker.Available()
	}
	return c.shards.available(key)
}

// OneShard reports whether every key lives on one Redis server
// (standalone or Sentinel), so calls on keys of different hash tags may
// share a pipeline without one shard holding up another.
func (c *Conn) OneShard() bool { return c.shards == nil }

// BreakerFor is the breaker guarding key: the one breaker, or on Cluster the
// breaker of the node now serving key's slot (nil until the slot map is
// loaded, when Available answers from the seeds).
func (c *Conn) BreakerFor(key string) *Breaker {
	if c.shards == nil {
		return c.breaker
	}
	return c.shards.breakerFor(key)
}

// Close closes the client (and, on Cluster, the slot-map loader's
// connections).
func (c *Conn) Close() error {
	err := c.Client.Close()
	if c.shards != nil {
		c.shards.close()
	}
	return err
}

// bound applies the timeouts, retry policy and pool size described on
// Connect to a standalone client's options.
func bound(o *redis.Options, t time.Duration, pool int) {
	o.PoolSize = pool
	o.ReadBufferSize, o.WriteBufferSize = connBuffer, connBuffer
	o.ConnMaxIdleTime = -1
	o.MaintNotificationsConfig = noMaint()
	o.DialTimeout = t
	o.ReadTimeout = t
	o.WriteTimeout = t
	o.PoolTimeout = poolWait(t)
	o.ContextTimeoutEnabled = true
	o.MaxRetries = -1
	o.DialerRetries = 1
}

// connBuffer is the read and the write buffer of a pooled connection.
// go-redis gives each 32 KiB: 4 MiB of a node's live heap for a pool of 64,
// which carries admission scripts and replies of a few hundred bytes to a
// few KiB (a 10,000-team node's heap profile: 4.7 MB of the 50 MB it
// held). Longer arguments and replies (a cached entry) still pass, in more
// read and write calls. The pipeline pool, which the writer's flushes use,
// keeps go-redis's 128 KiB.
const connBuffer = 8 << 10

// poolWait is how long a call may wait for a pooled connection: half of
// redis.timeout. A call that gets a connection then has at least the other
// half for its round trip, so a socket timeout still means Redis did not
// answer for that long (a failure the breaker counts), never that a burst
// larger than the pool ate the deadline in the queue (it did: at 3,000
// concurrent admissions the calls served last timed out on the socket with
// a millisecond left, in a row, and opened the breaker). A call that waits
// longer fails with ErrPoolTimeout, which the breaker ignores.
func poolWait(t time.Duration) time.Duration { return t / 2 }

func noMaint() *maintnotifications.Config {
	return &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
}

// pingProbe returns a breaker probe: PING on a fresh connection to each
// address in turn, bounded by t per address, outside the guarded client (so
// the breaker's own Limiter cannot refuse it). Any reply but an unhealthy one
// (LOADING, BUSY...) means Redis is back; even NOAUTH proves it answers.
func pingProbe(dial func(context.Context, string, string) (net.Conn, error), network string, addrs []string, t time.Duration) func() error {
	return func() error {
		var last error
		for _, addr := range addrs {
			if last = ping(dial, network, addr, t); last == nil {
				return nil
			}
		}
		return last
	}
}

func ping(dial func(context.Context, string, string) (net.Conn, error), network, addr string, t time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), t)
	defer cancel()
	c, err := dial(ctx, network, addr)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(t)); err != nil {
		return err
	}
	if _, err := io.WriteString(c, "*1\r\n$4\r\nPING\r\n"); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if strings.HasPrefix(line, "-") {
		if rerr := replyError(strings.TrimSpace(line[1:])); IsFailure(rerr) {
			return rerr
		}
	}
	return nil
}

// replyError is an error reply read by the probe, a redis.Error.
type replyError string

func (e replyError) Error() string { return string(e) }

// RedisError marks replyError as a Redis reply (redis.Error).
func (replyError) RedisError() {}
