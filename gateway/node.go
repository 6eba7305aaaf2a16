package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"switchyard/catalog"
	"switchyard/config"
	"switchyard/edge"
	"switchyard/providers"
	"switchyard/ratelimit"
	"switchyard/redact"
	"switchyard/responses"
	"switchyard/routing"
	"switchyard/routing/tier"
	"switchyard/telemetry"
	"switchyard/tracing"
)

// Options tunes how a Node is assembled; the zero value is a local-only
// production node. Package node fills the shared parts (edge state, audit
// reads, usage, catalog store) for a node with Redis; gateway itself never
// talks to Redis.
type Options struct {
	Logger *slog.Logger
	// RequestLog writes each request's log line (SPEC 12.2); nil: one
	// through Logger. cmd/switchyard builds it with its logger, on the
	// writer the logger writes to, so lines skip slog's cost.
	RequestLog *telemetry.RequestLog
	Clock      routing.Clock // nil: the real clock
	Seed       int64         // routing randomness; 0: time-based
	Store      catalog.Store // catalog store; nil: a file under data_dir, or memory when data_dir is ""
	// Version is the build's version, the service.version of its traces.
	Version string

	// Shared parts; nil: node-local ones.
	Registry *prometheus.Registry // with Metrics registered on it
	Metrics  *telemetry.Metrics
	Edge     edge.State
	Audit    telemetry.AuditLog
	Ring     *telemetry.Ring // the ring the local edge state records into (nil: a new one)
	Usage    routing.UsageSource
	// Responses is the Responses API store; nil: a local one, closed with
	// the node (a shared one is closed by whoever built it).
	Responses responses.Store
	// RedisState reports "up", "down" or "disabled" (nil: "disabled").
	RedisState func() string
	// ConfigPath is the file a reload re-reads (SIGHUP, POST /admin/reload);
	// "" when the node serves the built-in demo.
	ConfigPath string
}

// Node is one assembled gateway process: the server and everything it owns.
type Node struct {
	*Server
	closers  []func(context.Context) error
	closed   sync.Once
	closeErr error
	started  time.Time
	publish  func(*catalog.State) bool
	store    catalog.Store
}

// Assemble builds a node from a validated configuration: catalog, router,
// adapters, edge state, classifier, audit log and metrics.
func Assemble(cfg *config.Config, opt Options) (*Node, error) {
	log := opt.Logger
	if log == nil {
		log = slog.Default()
	}
	log = slog.New(redact.Handler(log.Handler())) // no log line carries a credential (SPEC 15)
	clock := opt.Clock
	if clock == nil {
		clock = routing.SystemClock{}
	}
	seed := opt.Seed
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	reg, metrics := opt.Registry, opt.Metrics
	if reg == nil || metrics == nil {
		reg = prometheus.NewRegistry()
		metrics = telemetry.NewMetrics(reg)
		metrics.RedisUp.Set(0)
	}
	tracer, err := tracing.New(cfg.Tracing, tracing.Options{Node: cfg.Server.NodeID, Version: opt.Version, Registry: reg, Logger: log})
	if err != nil {
		return nil, err
	}
	if tracer != nil {
		log.Info("tracing on: exporting spans over OTLP/HTTP", "sample_ratio", cfg.Tracing.SampleRatio, "service_name", cfg.Tracing.ServiceName)
	}
	// the first closer runs last: the spans of the final requests are
	// flushed (bounded) after everything else has stopped
	n := &Node{started: time.Now(), closers: []func(context.Context) error{tracer.Shutdown}}

	store := opt.Store
	if store == nil {
		var err error
		if store, err = localStore(cfg); err != nil {
			return nil, err
		}
	}
	n.store = store
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

	es, audit, usage := opt.Edge, opt.Audit, opt.Usage
	if es == nil {
		ring := opt.Ring
		if ring == nil {
			ring = telemetry.NewRing(cfg.Audit.MaxEntries)
		}
		es = edge.NewLocal(clock.Now, ring)
		if audit == nil {
			audit = ring
		}
	}
	if audit == nil {
		audit = telemetry.NewRing(1)
	}
	es.SetBudgetAlert(func(team string, level edge.LevelKind, name string) { // SPEC 3.1: once per level and period
		metrics.BudgetAlerts.WithLabelValues(level.String()).Inc()
		attrs := []any{"team", team, "level", level.String()}
		if level != edge.LevelTeam {
			attrs = append(attrs, level.String(), name)
		}
		log.Warn("budget alert: the "+level.String()+"'s spend crossed budget.alert_at of its budget this period", attrs...)
	})
	if usage == nil {
		usage = ratelimit.NewLocalUsage(clock.Now)
	}
	n.closers = append(n.closers, es.Close)
	respStore := opt.Responses
	if respStore == nil {
		respStore = responses.NewLocal(clock.Now, ResponsesConfig(cfg))
		n.closers = append(n.closers, respStore.Close)
	}
	router := routing.NewRouter(cfg.Routing, clock, seed, &routingObserver{m: metrics}, usage)
	router.Sync(holder.Load())
	live := NewLive(&LiveConfig{Config: cfg, Router: router, Adapters: adapters, Tier: tier.New(cfg.SmartRouting), teams: teamsPrint(cfg.Teams)})
	// on Close the live adapters release their pools and background work
	// (a vertex adapter's token refresh)
	n.closers = append(n.closers, func(context.Context) error {
		for _, a := range live.Load().Adapters {
			if c, ok := a.(interface{ CloseIdleConnections() }); ok {
				c.CloseIdleConnections()
			}
		}
		return nil
	})
	reloader := NewReloader(live, holder, opt.ConfigPath, log)
	n.publish = reloader.Publish

	if len(cfg.SmartRouting.Routes) == 0 {
		log.Info("smart tier routing is off: no smart_routing.routes configured")
	}
	deps := Deps{
		Config: cfg, Catalog: holder, Router: router, Adapters: adapters, Edge: es,
		Tier: live.Load().Tier, Audit: audit, Responses: respStore,
		Metrics: metrics, Registry: reg, Logger: log, RedisState: opt.RedisState, Tracer: tracer,
		Live: live, Reloader: reloader, Version: opt.Version,
		RequestLog: opt.RequestLog,
	}
	n.Server = New(deps)
	admin := NewAdmin(func() *config.Config { return live.Load().Config }, holder, store, func(st *catalog.State) { n.publish(st) })
	reloader.setAdmin(admin) // a reload syncs the file's config keys into the store
	if _, w, err := admin.syncConfigKeys(context.Background(), cfg); err != nil || len(w) > 0 {
		log.Warn("config keys of the file not fully applied to the catalog", "problems", w, "error", err)
	}
	// the catalog holds the teams and their keys now; the running
	// configuration keeps their fingerprint (LiveConfig.teams). Nothing
	// serves yet, so the configuration is changed in place, once.
	cfg.Teams = nil
	if cfg.Admin.Key != "" {
		n.Server.Admin = admin
		n.Server.Admin.register(n.Server.adminGroup)
	}
	// a deleted team's metric series and edge state leave once no request
	// admitted before its deletion can still be running (goneTeams)
	sweepCtx, stopSweep := context.WithCancel(context.Background())
	go n.sweepGoneTeams(sweepCtx, []teamStore{metrics, es, &n.Server.cacheStats}, usage)
	n.OnClose(func(context.Context) error { stopSweep(); return nil })
	return n, nil
}

// Publish builds and serves a catalog state unless it is older than the one
// served (a watcher's reload racing an admin publish); it reports whether st
// was taken.
func (n *Node) Publish(st *catalog.State) bool { return n.publish(st) }

// Store is the node's catalog store.
func (n *Node) Store() catalog.Store { return n.store }

// Started is when the node was assembled.
func (n *Node) Started() time.Time { return n.started }

// OnClose adds fn to what Close runs (last added, first run).
func (n *Node) OnClose(fn func(context.Context) error) { n.closers = append(n.closers, fn) }

// SetCluster sets the GET /admin/cluster node listing; call before serving.
func (n *Node) SetCluster(fn func(ctx context.Context) (any, error)) { n.Server.Cluster = fn }

// SetClusterHealth sets where GET /admin/health?node=all reads the health
// snapshots the live nodes publish; call before serving.
func (n *Node) SetClusterHealth(fn func(ctx context.Context) ([]NodeHealth, error)) {
	n.Server.ClusterHealth = fn
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

// ResponsesConfig is the response store's part of cfg (responses.*).
func ResponsesConfig(cfg *config.Config) responses.Config {
	return responses.Config{TTL: cfg.Responses.StoreTTL, MaxLocal: cfg.Responses.MaxLocal,
		MaxLocalBytes: cfg.Responses.MaxLocalBytes, MaxTeamBytes: cfg.Responses.MaxTeamBytes}
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
