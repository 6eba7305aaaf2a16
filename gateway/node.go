package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"switchyard/catalog"
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
	closers []func(context.Context) error
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
	n := &Node{}

	store := opt.Store
	if store == nil {
		var err error
		if store, err = localStore(cfg); err != nil {
			return nil, err
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
	usage := routing.NewLocalUsage()
	router := routing.NewRouter(cfg.Routing, clock, seed, &routingObserver{m: metrics}, usage)
	limiter := ratelimit.NewLocal(clock.Now, 1)
	n.closers = append(n.closers, limiter.Close)
	pins := sessions.NewLocal(clock.Now, 1_000_000)

	if len(cfg.SmartRouting.Routes) == 0 {
		log.Info("smart tier routing is off: no smart_routing.routes configured")
	}
	n.Server = New(Deps{
		Config: cfg, Catalog: holder, Router: router, Adapters: adapters, Limiter: limiter,
		Sessions: pins, Tier: tier.New(cfg.SmartRouting), Audit: telemetry.NewRing(cfg.Audit.MaxEntries),
		Metrics: metrics, Registry: reg, Logger: log,
	})
	if cfg.Admin.Key != "" {
		n.Server.Admin = NewAdmin(cfg, holder, store, nil)
		n.Server.Admin.register(n.Server.adminGroup)
	}
	return n, nil
}

// Close flushes pending writes (usage, pins, audit) and releases resources.
func (n *Node) Close(ctx context.Context) error {
	var first error
	for i := len(n.closers) - 1; i >= 0; i-- {
		if err := n.closers[i](ctx); err != nil && first == nil {
			first = err
		}
	}
	return first
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
	if err != nil {
		return nil, fmt.Errorf("loading catalog: %w", err)
	}
	if ok {
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
