package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"switchyard/catalog"
	"switchyard/cluster"
	"switchyard/config"
	"switchyard/providers"
	"switchyard/ratelimit"
	"switchyard/routing"
	"switchyard/routing/tier"
	"switchyard/sessions"
	"switchyard/telemetry"
)

// Options tunes how a Node is assembled; the zero value is production.
type Options struct {
	Logger *slog.Logger
	Clock  routing.Clock // nil: the real clock
	Seed   int64         // routing randomness; 0: time-based
	Store  catalog.Store // catalog store; nil: a file under data_dir, or memory when data_dir is ""
}

// Node is one assembled gateway process: the server and everything it owns.
type Node struct {
	*Server
	closers  []func(context.Context) error
	closed   sync.Once
	closeErr error
	started  time.Time
	redis    redis.UniversalClient // nil in local mode; tests hook it to count round trips
}

// Assemble builds a node from a validated configuration: catalog, router,
// adapters, limiter, session store, classifier, audit log and metrics.
func Assemble(cfg *config.Config, opt Options) (*Node, error) {
	log := opt.Logger
	if log == nil {
		log = slog.Default()
	}
	clock := opt.Clock
	if clock == nil {
		clock = routing.SystemClock{}
	}
	seed := opt.Seed
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	reg := prometheus.NewRegistry()
	metrics := telemetry.NewMetrics(reg)
	n := &Node{started: time.Now()}
	rs := &redisSide{}
	if cfg.Redis.Enabled() {
		var err error
		if rs, err = connectRedis(cfg, metrics, log); err != nil {
			return nil, err
		}
		n.closers = append(n.closers, func(context.Context) error { return rs.client.Close() })
		n.redis = rs.client
	} else {
		metrics.RedisUp.Set(0)
	}

	store := opt.Store
	if store == nil {
		if rs.client != nil {
			store = catalog.NewRedisStore(rs.client, cfg.Redis.KeyPrefix, time.Second)
		} else {
			var err error
			if store, err = localStore(cfg); err != nil {
				return nil, err
			}
		}
	}
	state, err := loadOrSeed(context.Background(), cfg, store, log)
	if err != nil {
		return nil, err
	}
	holder := catalog.NewHolder(catalog.Build(cfg, state))

	adapters := map[string]providers.Adapter{}
	for _, p := range holder.Load().Providers {
		a, err := providers.New(p)
		if err != nil {
			return nil, fmt.Errorf("provider %s: %w", p.Name, err)
		}
		adapters[p.Name] = a
	}

	rlObs := &limitObserver{m: metrics}
	divisor := 1 // local-only: the node holds the whole team limit
	if rs.client != nil {
		divisor = cfg.Redis.ExpectedReplicas // fallback share while Redis is gone (SPEC 9)
	}
	localLimiter := ratelimit.NewLocal(clock.Now, divisor)
	localPins := sessions.NewLocal(clock.Now, sessions.DefaultMaxEntries*10)
	ring := telemetry.NewRing(cfg.Audit.MaxEntries)
	var (
		limiter ratelimit.Limiter   = localLimiter
		pins    sessions.Store      = localPins
		usage   routing.UsageSource = ratelimit.NewLocalUsage(clock.Now)
		audit   telemetry.AuditLog  = ring
	)
	if rs.client != nil {
		prefix, timeout := cfg.Redis.KeyPrefix, cfg.Redis.Timeout
		rl := ratelimit.NewRedis(rs.client, rs.breaker, prefix, timeout, localLimiter, rlObs)
		rl.SetSlotTTL(cfg.Server.RequestTimeout + time.Minute)
		limiter = rl
		sp := sessions.NewRedis(rs.client, prefix, timeout, localPins, rlObs)
		pins = sp
		ru := ratelimit.NewRedisUsage(rs.client, prefix, timeout, cfg.Redis.ExpectedReplicas, clock.Now, rlObs)
		usage = ru
		ra := telemetry.NewRedisAudit(rs.client, prefix, cfg.Audit.MaxEntries, ring, func(k int) { metrics.AuditDropped.Add(float64(k)) })
		audit = ra
		n.closers = append(n.closers, ru.Close, sp.Close, ra.Close)
	}
	n.closers = append(n.closers, limiter.Close)
	router := routing.NewRouter(cfg.Routing, clock, seed, &routingObserver{m: metrics}, usage)
	router.Sync(holder.Load())
	publish := func(st *catalog.State) {
		snap := catalog.Build(cfg, st)
		holder.Store(snap)
		router.Sync(snap)
	}

	if len(cfg.SmartRouting.Routes) == 0 {
		log.Info("smart tier routing is off: no smart_routing.routes configured")
	}
	deps := Deps{
		Config: cfg, Catalog: holder, Router: router, Adapters: adapters, Limiter: limiter,
		Sessions: pins, Tier: tier.New(cfg.SmartRouting), Audit: audit,
		Metrics: metrics, Registry: reg, Logger: log,
	}
	if rs.client != nil {
		deps.RedisState = rs.state
		ctx, cancel := context.WithCancel(context.Background())
		n.closers = append(n.closers, func(context.Context) error { cancel(); return nil })
		if rstore, ok := store.(*catalog.RedisStore); ok {
			subscribed := make(chan struct{})
			go rstore.Watch(ctx, func() int64 { return holder.Load().Version }, func(st *catalog.State) {
				publish(st)
				log.Info("catalog reloaded after a change notice", "version", st.Version)
			}, 5*time.Second, func() { close(subscribed) })
			select { // start serving once change notices reach us (bounded)
			case <-subscribed:
			case <-time.After(2 * time.Second):
				log.Warn("catalog change notices not subscribed yet; polling every 5s until they are")
			}
		}
		hb := cluster.NewHeartbeat(rs.client, cfg.Redis.KeyPrefix, 2*time.Second, func() cluster.NodeInfo {
			return cluster.NodeInfo{Node: cfg.Server.NodeID, CatalogVersion: holder.Load().Version, Redis: rs.state(), Started: n.started}
		})
		go hb.Run(ctx)
		deps.Cluster = func(ctx context.Context) (any, error) { return hb.Nodes(ctx) }
	}
	n.Server = New(deps)
	if rl, ok := limiter.(*ratelimit.Redis); ok {
		if sp, ok := pins.(*sessions.Redis); ok {
			n.Server.prefetch = &prefetcher{limiter: rl, pins: sp}
		}
	}
	if cfg.Admin.Key != "" {
		n.Server.Admin = NewAdmin(func() *config.Config { return cfg }, holder, store, publish)
		n.Server.Admin.register(n.Server.adminGroup)
	}
	return n, nil
}

// Close flushes pending writes (usage, pins, audit) and releases resources,
// waiting at most until ctx's deadline (10s when it has none). Only the
// first call does the work; later calls return its result.
func (n *Node) Close(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		// flushing to a Redis that is down must not hang shutdown forever
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
	}
	n.closed.Do(func() {
		for i := len(n.closers) - 1; i >= 0; i-- {
			if err := n.closers[i](ctx); err != nil && n.closeErr == nil {
				n.closeErr = err
			}
		}
	})
	return n.closeErr
}

// localStore picks the catalog store without Redis: a state file under
// data_dir, or memory when data_dir is empty (the demo).
func localStore(cfg *config.Config) (catalog.Store, error) {
	if cfg.DataDir == "" {
		return &catalog.MemoryStore{}, nil
	}
	return catalog.NewFileStore(cfg.DataDir)
}

// loadOrSeed returns the stored catalog state, seeding the store from the
// configuration file on first start (SPEC 11).
func loadOrSeed(ctx context.Context, cfg *config.Config, store catalog.Store, log *slog.Logger) (*catalog.State, error) {
	st, ok, err := store.Load(ctx)
	if errors.Is(err, catalog.ErrUnavailable) {
		// Redis is down at start: serve the config file's catalog (version 0,
		// so any stored version replaces it) and let the watcher load the
		// shared one when Redis answers (SPEC 9: never fail on Redis).
		log.Warn("catalog store unreachable at start: serving the config file's catalog until it answers", "error", err)
		st = catalog.SeedState(cfg)
		st.Version = 0
		return st, nil
	}
	if err != nil {
		return nil, fmt.Errorf("loading catalog: %w", err)
	}
	if ok {
		if catalog.MigrateState(st, cfg) {
			// a catalog from before teams and models lived in it: take them
			// from the file once, and store the result
			next := st.Clone()
			next.Version = st.Version + 1
			if err := store.Save(ctx, st.Version, next); err == nil {
				st = next
				log.Info("catalog took its teams and models from the config file (first start with them in the catalog)", "version", st.Version)
			}
		}
		if msg := st.Consistent(); msg != "" {
			log.Warn("stored catalog has a dangling fallback chain; it is skipped at runtime", "problem", msg)
		}
		log.Info("catalog loaded from store", "version", st.Version, "deployments", len(st.Deployments))
		return st, nil
	}
	st = catalog.SeedState(cfg)
	if err := store.Save(ctx, 0, st); err != nil && !errors.Is(err, catalog.ErrConflict) {
		return nil, fmt.Errorf("seeding catalog: %w", err)
	} else if err != nil {
		// another replica seeded first: use its state
		if st2, ok, err := store.Load(ctx); err == nil && ok {
			return st2, nil
		}
	}
	log.Info("catalog seeded from the config file", "deployments", len(st.Deployments))
	return st, nil
}
