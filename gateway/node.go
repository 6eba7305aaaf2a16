package gateway

import (
	"context"
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

	state := catalog.SeedState(cfg)
	holder := catalog.NewHolder(catalog.Build(cfg, state))

	adapters := map[string]providers.Adapter{}
	for _, p := range holder.Load().Providers {
		a, err := providers.New(p)
		if err != nil {
			return nil, fmt.Errorf("provider %s: %w", p.Name, err)
		}
		adapters[p.Name] = a
	}
	usage := ratelimit.NewLocalUsage(clock.Now)
	router := routing.NewRouter(cfg.Routing, clock, seed, &routingObserver{m: metrics}, usage)
	limiter := ratelimit.NewLocal(clock.Now, 1)
	n.closers = append(n.closers, limiter.Close)
	store := sessions.NewLocal(clock.Now, 1_000_000)

	if len(cfg.SmartRouting.Routes) == 0 {
		log.Info("smart tier routing is off: no smart_routing.routes configured")
	}
	n.Server = New(Deps{
		Config: cfg, Catalog: holder, Router: router, Adapters: adapters, Limiter: limiter,
		Sessions: store, Tier: tier.New(cfg.SmartRouting), Audit: telemetry.NewRing(cfg.Audit.MaxEntries),
		Metrics: metrics, Registry: reg, Logger: log,
	})
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
