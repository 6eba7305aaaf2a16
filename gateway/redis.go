package gateway

import (
	"log/slog"

	"github.com/redis/go-redis/v9"

	"switchyard/cluster"
	"switchyard/config"
	"switchyard/telemetry"
)

// redisSide is the node's connection to the shared Redis; zero when
// Redis is not configured.
type redisSide struct {
	client  redis.UniversalClient
	breaker *cluster.Breaker
}

func (r *redisSide) state() string {
	if r.breaker == nil {
		return "disabled"
	}
	if r.breaker.Up() {
		return "up"
	}
	return "down"
}

// connectRedis builds the client and wires the breaker to the metrics and
// the log. A Redis that is down at start is not an error: the node starts
// in local fallback and joins shared state when Redis answers.
func connectRedis(cfg *config.Config, m *telemetry.Metrics, log *slog.Logger) (*redisSide, error) {
	c, br, err := cluster.NewClient(cfg.Redis)
	if err != nil {
		return nil, err
	}
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
	return &redisSide{client: c, breaker: br}, nil
}

// limitObserver counts fallbacks and lost writes of ratelimit and sessions.
type limitObserver struct{ m *telemetry.Metrics }

func (o *limitObserver) OnFallback(component string) {
	o.m.RedisFallback.WithLabelValues(component).Inc()
}
func (o *limitObserver) OnDropped(n int)            { o.m.UsageDropped.Add(float64(n)) }
func (o *limitObserver) OnReject(team, kind string) {}
