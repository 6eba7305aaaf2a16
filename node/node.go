// Package node assembles one Switchyard process (SPEC 17): with redis.url
// (or redis.addrs) it connects the shared Redis, builds the Redis edge state
// (package edge), the shared audit log, the shared deployment usage, the
// Redis catalog store and the shared Responses store (package responses),
// and starts the catalog watcher and the heartbeat; without Redis it is gateway.Assemble's local-only node. It is a package of
// its own, not part of cmd/switchyard, so the cluster tests and the benches
// can assemble real nodes; it is the one place that imports both gateway
// and go-redis (gateway itself does not).
package node

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"switchyard/cache/shared"
	"switchyard/catalog"
	"switchyard/cluster"
	"switchyard/config"
	"switchyard/edge"
	"switchyard/gateway"
	"switchyard/ratelimit"
	"switchyard/responses"
	"switchyard/telemetry"
)

// warmTimeout bounds opening the Redis connections before serving.
const warmTimeout = 3 * time.Second

// Options tunes assembly; the zero value is production.
type Options = gateway.Options

// Node is an assembled process: the gateway node and, with Redis, its
// client (tests hook it to count round trips).
type Node struct {
	*gateway.Node
	Redis redis.UniversalClient // nil in local mode

	hb *cluster.Heartbeat // nil in local mode
}

// catalogIO bounds a read or write of the catalog's value (the store's
// own timeout then bounds the call: a second plus one per 16 MB).
const catalogIO = 30 * time.Second

// catalogPoll is how often the catalog watcher asks Redis for the stored
// version behind the change notices. Pub/sub delivers at most once: a
// notice published while the subscription reconnects (a failover, a
// network blip) is lost, and the poll is then all that makes a revoked key
// or a deleted team stop on this replica, which SPEC 11 wants within one
// second. A poll is one GET of the version (the state is read only when it
// changed), so four a second cost Redis nothing worth counting.
const catalogPoll = 250 * time.Millisecond

// Assemble builds a node from a validated configuration.
func Assemble(cfg *config.Config, opt Options) (*Node, error) {
	if !cfg.Redis.Enabled() {
		n, err := gateway.Assemble(cfg, opt)
		if err != nil {
			return nil, err
		}
		return &Node{Node: n}, nil
	}
	log := opt.Logger
	if log == nil {
		log = slog.Default()
	}
	reg := prometheus.NewRegistry()
	m := telemetry.NewMetrics(reg)
	conn, err := cluster.Connect(cfg.Redis, cluster.Options{})
	if err != nil {
		return nil, err
	}
	c, br := conn.Client, conn.Breaker()
	m.RedisUp.Set(1)
	br.OnChange(func(up bool) {
		if up {
			m.RedisUp.Set(1)
			log.Info("redis is back: shared limits, pins and catalog resume")
		} else {
			m.RedisUp.Set(0)
			log.Warn("redis unreachable: local fallback (limits / expected_replicas, node-local pins, last catalog)")
		}
	})
	prefix := cfg.Redis.KeyPrefix
	obs := &observer{m: m, log: log}
	var clock func() time.Time
	if opt.Clock != nil {
		clock = opt.Clock.Now
	}
	ring := telemetry.NewRing(cfg.Audit.MaxEntries)
	audit := telemetry.NewRedisAudit(c, prefix, cfg.Audit.MaxEntries, ring)
	usage := ratelimit.NewRedisUsage(c, prefix, cfg.Redis.Timeout, cfg.Redis.ExpectedReplicas, clock, usageObserver{obs})
	// conn answers per key: on Redis Cluster a team goes local only when its
	// own shard is down
	es := edge.NewRedis(c, conn, edge.Config{
		Prefix: prefix, Timeout: cfg.Redis.Timeout, SlotLease: cfg.Redis.SlotLease,
		Divisor: cfg.Redis.ExpectedReplicas, Clock: clock, MaxAudit: cfg.Audit.MaxEntries,
		OneShard: conn.OneShard(),
	}, ring, audit, usage, obs)
	store := opt.Store
	var bulk *cluster.Conn
	if store == nil {
		// the catalog is one large value (30 MB with 100,000 keys): its own
		// two connections, whose reads and writes may take the seconds such
		// a value needs, off the request path's pool and timeouts
		bcfg := cfg.Redis
		bcfg.PoolSize = 2
		bulk, err = cluster.Connect(bcfg, cluster.Options{BulkIO: catalogIO})
		if err != nil {
			_ = conn.Close()
			return nil, err
		}
		store = catalog.NewRedisStore(bulk.Client, prefix, time.Second)
	}
	state := func() string {
		if br.Up() {
			return "up"
		}
		return "down"
	}
	now := time.Now
	if clock != nil {
		now = clock
	}
	rcfg := gateway.ResponsesConfig(cfg)
	rstore := responses.NewRedis(c, prefix, cfg.Redis.Timeout, rcfg, responses.NewLocal(now, rcfg), log)
	o := opt
	o.Store, o.Registry, o.Metrics, o.Edge, o.Audit, o.Usage, o.RedisState = store, reg, m, es, audit, usage, state
	o.Responses = rstore
	gn, err := gateway.Assemble(cfg, o)
	if err != nil {
		_ = rstore.Close(context.Background())
		_ = es.Close(context.Background())
		_ = conn.Close()
		if bulk != nil {
			_ = bulk.Close()
		}
		return nil, err
	}
	// Open every pooled connection before serving: a fresh node dialing
	// inside its first burst missed redis.timeout and over-admitted locally.
	// Bounded; a Redis down at start is a fallback, not a failed start.
	wctx, wcancel := context.WithTimeout(context.Background(), warmTimeout)
	if err := conn.Warm(wctx); err != nil {
		log.Warn("redis connections not all opened before serving; they open on first use", "error", err)
	}
	wcancel()
	n := &Node{Node: gn, Redis: c}
	ctx, cancel := context.WithCancel(context.Background())
	// closers run last added first: stop the loops, then (gateway's) the
	// edge writer flushes, then the client closes
	gn.OnClose(func(context.Context) error {
		if bulk != nil {
			_ = bulk.Close()
		}
		return conn.Close()
	})
	gn.OnClose(func(ctx context.Context) error { return es.Close(ctx) })
	gn.OnClose(rstore.Close)
	// the heartbeat leaves (takes this process out of the live set) when
	// its loop ends: the loops stop first, and the client is closed only
	// once that leave has run (or ctx ends), else it fails on a closed
	// client and the node is counted live for three more intervals
	hbDone := make(chan struct{})
	gn.OnClose(func(ctx context.Context) error {
		cancel()
		select {
		case <-hbDone:
		case <-ctx.Done():
		}
		return nil
	})
	if rstore, ok := store.(*catalog.RedisStore); ok {
		subscribed := make(chan struct{})
		go rstore.Watch(ctx, func() int64 { return gn.Catalog.Load().Version }, func(st *catalog.State) {
			if gn.Publish(st) {
				log.Info("catalog reloaded after a change notice", "version", st.Version)
			}
		}, catalogPoll, func() { close(subscribed) })
		select { // start serving once change notices reach us (bounded)
		case <-subscribed:
		case <-time.After(2 * time.Second):
			log.Warn("catalog change notices not subscribed yet; polling the catalog version until they are", "every", catalogPoll.String())
		}
	}
	// purges and the cache's counters reach every node (SPEC 18); admin
	// calls, not the request path: the catalog store's generous timeout
	n.SetCacheShared(shared.New(c, shared.Config{Prefix: prefix, Timeout: time.Second}))
	hb := cluster.NewHeartbeat(c, prefix, 2*time.Second, func() cluster.NodeInfo {
		return cluster.NodeInfo{Node: cfg.Server.NodeID, Version: opt.Version, CatalogVersion: gn.Catalog.Load().Version, Redis: state(), Started: gn.Started(),
			Health: gn.HealthJSON()}
	})
	// another live process announcing this node's server.node_id: logged
	// by the heartbeat, counted here
	hb.OnCollision(func(string, int) { m.NodeIDCollisions.Inc() })
	if cfg.Redis.ExpectedReplicas == 0 {
		// the fallback divides by the live node count it last saw (SPEC 9)
		hb.OnLive(func(n int) { es.SetDivisor(n); usage.SetDivisor(n) })
	}
	n.hb = hb
	go func() { hb.Run(ctx); close(hbDone) }()
	gn.SetCluster(func(ctx context.Context) (any, error) {
		ns, err := hb.Nodes(ctx)
		for i := range ns {
			ns[i].Health = nil // GET /admin/health?node=all answers it; the listing stays small
		}
		return ns, err
	})
	gn.SetClusterHealth(func(ctx context.Context) ([]gateway.NodeHealth, error) {
		ns, err := hb.Nodes(ctx)
		if err != nil {
			return nil, err
		}
		out := make([]gateway.NodeHealth, 0, len(ns))
		for _, n := range ns {
			if len(n.Health) > 0 {
				out = append(out, gateway.NodeHealth{Node: n.Node, Seen: n.Seen, Deployments: n.Health})
			}
		}
		return out, nil
	})
	return n, nil
}

// observer turns the edge state's and the usage counter's events into
// metrics.
type observer struct {
	m   *telemetry.Metrics
	log *slog.Logger
}

// OnFallback implements edge.Observer.
func (o *observer) OnFallback(component string) { o.m.RedisFallback.WithLabelValues(component).Inc() }

// OnDropped implements edge.Observer: lost audit entries in
// switchyard_audit_dropped_total, every other kind (pins, releases, usage)
// in switchyard_edge_dropped_total{kind}, and usage also in
// switchyard_usage_dropped_total, which counts usage deltas only.
func (o *observer) OnDropped(kind string, n int) {
	switch kind {
	case "audit":
		o.m.AuditDropped.Add(float64(n))
		return
	case "usage":
		o.m.UsageDropped.Add(float64(n))
	}
	o.m.EdgeDropped.WithLabelValues(kind).Add(float64(n))
}

// OnWriteError implements edge.Observer: one team's post-response writes
// that Redis rejected, logged and counted in
// switchyard_usage_write_errors_total (SPEC 14).
func (o *observer) OnWriteError(team, err string) {
	o.m.UsageWriteErrors.Inc()
	o.log.Error("Redis rejected a team's post-response writes; they are lost, the other teams' were applied",
		"team", team, "error", err)
}

// usageObserver is the observer as ratelimit.Observer.
type usageObserver struct{ o *observer }

func (u usageObserver) OnFallback(component string) { u.o.OnFallback(component) }
func (u usageObserver) OnDropped(n int)             { u.o.OnDropped("usage", n) }
func (u usageObserver) OnReject(string, string)     {}

var (
	_ edge.Observer      = (*observer)(nil)
	_ ratelimit.Observer = usageObserver{}
)
