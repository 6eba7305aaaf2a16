// Package cluster owns the connection to the shared Redis (SPEC 9): it builds
// the go-redis UniversalClient for the configured topology (standalone,
// Sentinel, Cluster) with every call bounded by redis.timeout, guards it with
// a circuit Breaker so a down Redis costs nothing once detected, and names the
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
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"switchyard/config"
)

// DefaultTimeout is redis.timeout when the config leaves it zero (SPEC 13).
const DefaultTimeout = 50 * time.Millisecond

// ErrNotConfigured is returned by NewClient when neither redis.url nor
// redis.addrs is set: the gateway then runs local-only.
var ErrNotConfigured = errors.New("cluster: redis not configured")

// NewClient builds the shared Redis client for cfg and the Breaker that
// guards it (threshold DefaultThreshold, cool DefaultCool, wall clock):
//
//   - redis.url alone: a standalone client (redis:// or rediss://, with the
//     URL's credentials, database and TLS);
//   - redis.addrs with redis.master_name: a Sentinel failover client;
//   - redis.addrs alone: a Cluster client (a single address is a
//     standalone server).
//
// With addrs, credentials and TLS still come from redis.url when both are set.
// NewClient does not dial: a Redis that is down at start is a fallback
// condition, not a configuration error.
func NewClient(cfg config.Redis) (redis.UniversalClient, *Breaker, error) {
	br := NewBreaker(DefaultThreshold, DefaultCool, nil)
	c, err := NewClientWithBreaker(cfg, br)
	if err != nil {
		return nil, nil, err
	}
	return c, br, nil
}

// NewClientWithBreaker is NewClient with a caller-built breaker (tests inject
// a clock and a threshold through it).
//
// Every topology gets the same bounds, measured on this machine to matter:
//   - DialTimeout, ReadTimeout, WriteTimeout and PoolTimeout are redis.timeout
//     and ContextTimeoutEnabled is on, so a caller's deadline is honoured (by
//     default go-redis ignores it and a hung Redis held a call for 5 s);
//   - one dial attempt per call (DialerRetries 1): the default retried dials
//     and a refused port cost 1.7 s per call;
//   - no command retries (MaxRetries -1; MaxRedirects -1 on Cluster, which
//     also retries on network errors): an admission script is not
//     idempotent, and a retry after a timeout could charge it twice. A
//     MOVED reply during resharding therefore fails one call (the caller
//     falls back locally) and triggers a slot-map reload for the next.
//
// The breaker is installed as go-redis's Options.Limiter (per node on
// Cluster) with a PING probe of its own; the Sentinel client has no such
// option and gets it as a hook, probing with trial calls.
func NewClientWithBreaker(cfg config.Redis, br *Breaker) (redis.UniversalClient, error) {
	if !cfg.Enabled() {
		return nil, ErrNotConfigured
	}
	t := cfg.Timeout
	if t <= 0 {
		t = DefaultTimeout
	}
	base := &redis.Options{}
	if cfg.URL != "" {
		o, err := redis.ParseURL(cfg.URL)
		if err != nil {
			return nil, fmt.Errorf("cluster: parsing redis.url: %w", err)
		}
		base = o
	}
	bound(base, t)

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
			ReadTimeout:           t,
			WriteTimeout:          t,
			PoolTimeout:           t,
			ContextTimeoutEnabled: true,
		})
		if br != nil {
			fc.AddHook(hook{br}) // no probe: the hook's trials are per command, not per connection
		}
		return fc, nil
	case len(cfg.Addrs) > 1:
		if br != nil {
			br.SetProbe(pingProbe(redis.NewDialer(&redis.Options{DialTimeout: t, TLSConfig: base.TLSConfig}), "tcp", cfg.Addrs, t))
		}
		return redis.NewClusterClient(&redis.ClusterOptions{
			Addrs:                 cfg.Addrs,
			Username:              base.Username,
			Password:              base.Password,
			TLSConfig:             base.TLSConfig,
			MaxRedirects:          -1,
			MaxRetries:            -1,
			DialTimeout:           t,
			DialerRetries:         base.DialerRetries,
			ReadTimeout:           t,
			WriteTimeout:          t,
			PoolTimeout:           t,
			ContextTimeoutEnabled: true,
			NewClient: func(o *redis.Options) *redis.Client {
				if br != nil {
					o.Limiter = br
				}
				return redis.NewClient(o)
			},
		}), nil
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
		if br != nil {
			base.Limiter = br
			br.SetProbe(pingProbe(redis.NewDialer(base), network, []string{base.Addr}, t))
		}
		return redis.NewClient(base), nil
	}
}

// bound applies the timeouts and retry policy described on
// NewClientWithBreaker to a standalone client's options.
func bound(o *redis.Options, t time.Duration) {
	o.DialTimeout = t
	o.ReadTimeout = t
	o.WriteTimeout = t
	o.PoolTimeout = t
	o.ContextTimeoutEnabled = true
	o.MaxRetries = -1
	o.DialerRetries = 1
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
