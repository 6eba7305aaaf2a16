package config

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

const minimal = `
providers:
  - {name: sim, kind: simulated}
deployments:
  - {id: a, model: m, provider: sim}
teams:
  - {name: t, keys: ["k1"], models: ["*"]}
`

func TestLoadDefaults(t *testing.T) {
	c, err := Load([]byte(minimal), nil)
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name string
		got  any
		want any
	}{
		{"listen", c.Server.Listen, ":8080"},
		{"max_body", c.Server.MaxBodyBytes, int64(10 << 20)},
		{"upstream_timeout", c.Server.UpstreamTimeout, 60 * time.Second},
		{"redis timeout", c.Redis.Timeout, 50 * time.Millisecond},
		{"prefix", c.Redis.KeyPrefix, "switchyard:"},
		{"strategy", c.Routing.DefaultStrategy, "simple_shuffle"},
		{"cooldown_base", c.Routing.CooldownBase, 5 * time.Second},
		{"cooldown_max", c.Routing.CooldownMax, 5 * time.Minute},
		{"chat sync attempts", c.Routing.MaxAttempts["chat"]["sync"], 6},
		{"chat stream attempts", c.Routing.MaxAttempts["chat"]["stream"], 4},
		{"images attempts", c.Routing.MaxAttempts["images"]["sync"], 3},
		{"threshold", c.SmartRouting.Threshold, 4},
		{"code points", c.SmartRouting.Points["code"], 3},
		{"session ttl", c.SmartRouting.SessionTTL, 30 * time.Minute},
		{"weight", c.Deployments[0].Weight, 1.0},
		{"upstream_model", c.Deployments[0].UpstreamModel, "m"},
		{"operations", strings.Join(c.Deployments[0].Operations, ","), "chat"},
		{"enabled", c.Deployments[0].IsEnabled(), true},
		{"tools", c.Deployments[0].ToolsSupported(), true},
		{"sim ttfb", c.Providers[0].Simulate.TTFB, 20 * time.Millisecond},
		{"sim status", c.Providers[0].Simulate.ErrorStatus, 503},
		{"budget period", c.Teams[0].Budget.Period.Every, 720 * time.Hour},
		{"audit", c.Audit.MaxEntries, 10000},
		{"warm weight", c.Routing.WarmCacheWeight, 4.0},
	}
	for _, ch := range checks {
		if ch.got != ch.want {
			t.Errorf("%s: got %v, want %v", ch.name, ch.got, ch.want)
		}
	}
}

func TestEnvOverridesAndSecrets(t *testing.T) {
	yml := minimal + `
admin: {key: "${ADMIN}"}
`
	env := []string{
		"ADMIN=s3cret",
		"SWITCHYARD_REDIS_URL=redis://127.0.0.1:6379/0",
		"SWITCHYARD_SMART_ROUTING_THRESHOLD=6",
		"SWITCHYARD_ROUTING_COOLDOWN_BASE=2s",
		"SWITCHYARD_SERVER_LISTEN=:9999",
	}
	c, err := Load([]byte(yml), env)
	if err != nil {
		t.Fatal(err)
	}
	if c.Admin.Key != "s3cret" || c.Redis.URL != "redis://127.0.0.1:6379/0" || c.SmartRouting.Threshold != 6 ||
		c.Routing.CooldownBase != 2*time.Second || c.Server.Listen != ":9999" {
		t.Fatalf("overrides not applied: %+v %+v %+v", c.Admin, c.Redis, c.SmartRouting.Threshold)
	}
}

// TestValidationRules lists every rule with a config that breaks it; each
// must be reported naming its field, and all at once.
func TestValidationRules(t *testing.T) {
	cases := []struct {
		name, yaml, want string
	}{
		{"unknown top key", minimal + "bogus: 1\n", "bogus: unknown key"},
		{"unknown nested key", minimal + "routing: {cooldwn_base: 1s}\n", "routing.cooldwn_base: unknown key"},
		{"provider kind", "providers: [{name: p, kind: gcp}]\n", "providers[0].kind"},
		{"provider missing name", "providers: [{kind: simulated}]\n", "providers[0].name: required"},
		{"provider dup", "providers: [{name: p, kind: simulated}, {name: p, kind: simulated}]\n", "providers[1].name"},
		{"openai base url", "providers: [{name: p, kind: openai, base_url: 'ftp://x'}]\n", "providers[0].base_url"},
		{"error rate", "providers: [{name: p, kind: simulated, simulate: {error_rate: 2}}]\n", "simulate.error_rate"},
		{"deployment provider", "providers: [{name: p, kind: simulated}]\ndeployments: [{id: a, model: m, provider: nope}]\n", "deployments[0].provider"},
		{"deployment id", "providers: [{name: p, kind: simulated}]\ndeployments: [{model: m, provider: p}]\n", "deployments[0].id: required"},
		{"deployment dup", "providers: [{name: p, kind: simulated}]\ndeployments: [{id: a, model: m, provider: p},{id: a, model: m, provider: p}]\n", "deployments[1].id"},
		{"price cached_input", "providers: [{name: p, kind: simulated}]\ndeployments: [{id: a, model: m, provider: p, price: {input: 1, cached_input: -0.5}}]\n", "deployments[0].price.cached_input: must not be negative"},
		{"price cache_write", "providers: [{name: p, kind: simulated}]\ndeployments: [{id: a, model: m, provider: p, price: {input: 1, cache_write: -1}}]\n", "deployments[0].price.cache_write: must not be negative"},
		{"price unknown", "providers: [{name: p, kind: simulated}]\ndeployments: [{id: a, model: m, provider: p, price: {input: 1, cached: 0.5}}]\n", "price.cached: unknown key"},
		{"deployment op", "providers: [{name: p, kind: simulated}]\ndeployments: [{id: a, model: m, provider: p, operations: [audio]}]\n", "deployments[0].operations[0]"},
		{"strategy", minimal + "models: [{name: m, strategy: fastest}]\n", "models[0].strategy"},
		{"model without deployment", minimal + "models: [{name: ghost}]\n", "models[0].name"},
		{"objective", minimal + "models: [{name: m, strategy: adaptive, objective: speed}]\n", "models[0].objective"},
		{"team key empty", "teams: [{name: t, keys: ['${NOPE}']}]\n", "teams[0].keys[0]: empty"},
		{"team sha", "teams: [{name: t, keys: ['sha256:zz']}]\n", "teams[0].keys[0]: sha256"},
		{"team model", "teams: [{name: t, keys: [k], models: [ghost]}]\n", "teams[0].models[0]"},
		{"team negative", "teams: [{name: t, keys: [k], rpm: -1}]\n", "teams[0]: rpm"},
		{"route target", minimal + "smart_routing: {routes: [{alias: normal, easy: m, hard: ghost}]}\n", "smart_routing.routes[0].hard"},
		{"route alias clash", minimal + "smart_routing: {routes: [{alias: m, easy: m, hard: m}]}\n", "smart_routing.routes[0].alias"},
		{"route default tier", minimal + "smart_routing: {routes: [{alias: n, easy: m, hard: m, default_tier: mid}]}\n", "default_tier"},
		{"threshold", minimal + "smart_routing: {threshold: 0}\n", "smart_routing.threshold"},
		{"points unknown", minimal + "smart_routing: {points: {emoji: 3}}\n", "smart_routing.points.emoji"},
		{"attempts", minimal + "routing: {max_attempts: {chat: {sync: 0}}}\n", "routing.max_attempts.chat.sync"},
		{"cooldown order", minimal + "routing: {cooldown_base: 10m, cooldown_max: 1m}\n", "routing.cooldown_max"},
		{"failures", minimal + "routing: {failures_before_cooldown: 0}\n", "routing.failures_before_cooldown"},
		{"weight fraction", minimal + "routing: {min_weight_fraction: 2}\n", "routing.min_weight_fraction"},
		{"global fallback", minimal + "routing: {fallback_models: [ghost]}\n", "routing.fallback_models[0]"},
		{"fallback reason", minimal + "routing: {fallbacks: [{primary: m, reason: oops, models: [m2]}]}\n", "reason"},
		{"fallback self", minimal + "routing: {fallbacks: [{primary: m, models: [m]}]}\n", "is the primary itself"},
		{"fallback empty", minimal + "routing: {fallbacks: [{primary: m, models: []}]}\n", "1 to 5"},
		{"redis url", minimal + "redis: {url: 'http://x'}\n", "redis.url"},
		{"pool size", minimal + "redis: {pool_size: -5}\n", "redis.pool_size"},
		{"expected replicas", minimal + "redis: {expected_replicas: -1}\n", "redis.expected_replicas: must be >= 0"},
		{"bad duration", minimal + "server: {upstream_timeout: soon}\n", "upstream_timeout"},
		{"env section", minimal, "SWITCHYARD_NOPE_X"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := []string{}
			if tc.name == "env section" {
				env = append(env, "SWITCHYARD_NOPE_X=1")
			}
			_, err := Load([]byte(tc.yaml), env)
			if err == nil {
				t.Fatalf("want a problem mentioning %q, got none", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want a problem mentioning %q, got:\n%v", tc.want, err)
			}
		})
	}
}

// TestRedisZeroValues: expected_replicas 0 (the live node count of the
// heartbeats, SPEC 9) and pool_size 0 (sized from the CPUs) are valid.
func TestRedisZeroValues(t *testing.T) {
	c, err := Load([]byte("redis: {url: 'redis://127.0.0.1:6379/0', expected_replicas: 0, pool_size: 0}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Redis.ExpectedReplicas != 0 || c.Redis.PoolSize != 0 {
		t.Fatalf("expected_replicas %d, pool_size %d; want 0, 0", c.Redis.ExpectedReplicas, c.Redis.PoolSize)
	}
}

func TestAllProblemsAtOnce(t *testing.T) {
	_, err := Load([]byte("providers: [{name: p, kind: nope}]\nbogus: 1\nrouting: {failures_before_cooldown: 0}\n"), nil)
	p, ok := err.(Problems)
	if !ok || len(p) < 3 {
		t.Fatalf("want >= 3 problems at once, got %v", err)
	}
}

func TestDemoConfigValid(t *testing.T) {
	c, err := Demo(nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.SmartRouting.Routes) != 2 || len(c.Routing.Fallbacks) == 0 || len(c.Teams) != 1 {
		t.Fatalf("demo must have two tier routes, a fallback chain and a team: %+v", c.SmartRouting.Routes)
	}
}

// TestTracingConfig: tracing is off by default with SPEC 13's defaults,
// takes env overrides, and rejects a bad endpoint or ratio naming the key.
func TestTracingConfig(t *testing.T) {
	c, err := Load([]byte(minimal), nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Tracing.Enabled() || c.Tracing.SampleRatio != 1.0 || c.Tracing.ServiceName != "switchyard" {
		t.Fatalf("tracing defaults: %+v", c.Tracing)
	}
	c, err = Load([]byte(minimal), []string{"SWITCHYARD_TRACING_OTLP_ENDPOINT=http://otel-collector:4318", "SWITCHYARD_TRACING_SAMPLE_RATIO=0.25"})
	if err != nil {
		t.Fatal(err)
	}
	if !c.Tracing.Enabled() || c.Tracing.OTLPEndpoint != "http://otel-collector:4318" || c.Tracing.SampleRatio != 0.25 {
		t.Fatalf("tracing env overrides: %+v", c.Tracing)
	}
	for _, tc := range []struct{ yaml, want string }{
		{"tracing: {sample_ratio: 1.5}\n", "tracing.sample_ratio"},
		{"tracing: {sample_ratio: -0.1}\n", "tracing.sample_ratio"},
		{"tracing: {otlp_endpoint: 'otel-collector:4318'}\n", "tracing.otlp_endpoint: must be an http:// or https://"},
		{"tracing: {otlp_endpoint: 'grpc://otel:4317'}\n", "tracing.otlp_endpoint"},
		{"tracing: {otlp_endpoint: 'https://user:tok3n@otel'}\n", "OTEL_EXPORTER_OTLP_HEADERS"},
		{"tracing: {otlp_endpoint: 'http://otel:4318', service_name: ''}\n", "tracing.service_name"},
		{"tracing: {otlp_endpoint: 'http://otel:4318', sample: 1}\n", "tracing.sample: unknown key"},
	} {
		_, err := Load([]byte(minimal+tc.yaml), nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: want a problem mentioning %q, got %v", tc.yaml, tc.want, err)
		}
		if err != nil && strings.Contains(err.Error(), "tok3n") {
			t.Errorf("%q: the problem echoes a credential: %v", tc.yaml, err)
		}
	}
}

func TestMetricsListenValidated(t *testing.T) {
	for _, tc := range []struct{ yml, want string }{
		{"server: {metrics_listen: \"127.0.0.1:9090\"}\n", ""},
		{"server: {metrics_listen: \"nonsense\"}\n", "server.metrics_listen: \"nonsense\" is not host:port"},
		{"server: {listen: \":8080\", metrics_listen: \":8080\"}\n", "server.metrics_listen: \":8080\" is server.listen itself"},
	} {
		_, err := Load([]byte(tc.yml+minimal), nil)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%q: %v, want %q", tc.yml, err, tc.want)
		}
	}
}

// TestPriceCacheDefaults: cached_input and cache_write default to input
// when unset, and an explicit 0 (a free cache read) stays 0 (SPEC 10.2).
func TestPriceCacheDefaults(t *testing.T) {
	cfg, err := Load([]byte(`
providers: [{name: p, kind: simulated}]
deployments:
  - {id: unset, model: m, provider: p, price: {input: 3, output: 15}}
  - {id: set, model: m, provider: p, price: {input: 3, output: 15, cached_input: 0.3, cache_write: 3.75}}
  - {id: free, model: m, provider: p, price: {input: 3, output: 15, cached_input: 0, cache_write: 0}}
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range [][2]float64{{3, 3}, {0.3, 3.75}, {0, 0}} {
		p := cfg.Deployments[i].Price
		if got := [2]float64{p.CachedInputUSD(), p.CacheWriteUSD()}; got != want {
			t.Errorf("%s: cached_input, cache_write = %v, want %v", cfg.Deployments[i].ID, got, want)
		}
	}
	if p := cfg.Deployments[0].Price; p.CachedInput != nil || p.CacheWrite != nil {
		t.Errorf("unset prices must stay unset (nil), so a later input change moves them too: %+v", p)
	}
	// the admin API body is the same struct in JSON, with the same names
	var d Deployment
	if err := json.Unmarshal([]byte(`{"id":"x","model":"m","provider":"p","price":{"input":3,"output":15,"cached_input":0}}`), &d); err != nil {
		t.Fatal(err)
	}
	if d.Price.CachedInput == nil || d.Price.CachedInputUSD() != 0 || d.Price.CacheWriteUSD() != 3 {
		t.Fatalf("JSON body: %+v", d.Price)
	}
	out, _ := json.Marshal(cfg.Deployments[0].Price)
	if string(out) != `{"input":3,"output":15}` {
		t.Fatalf("an unset cache price must not be written back: %s", out)
	}
}

// SPEC 3.1: a team key is a plain string or an object; the object's models
// must narrow the team's allowlist, its expiry is RFC 3339, and a field it
// does not know is reported like any unknown key.
func TestKeyObjects(t *testing.T) {
	base := "providers: [{name: sim, kind: simulated}]\ndeployments: [{id: a, model: m, provider: sim}, {id: b, model: n, provider: sim}]\n"
	c, err := Load([]byte(base+`teams:
  - {name: t, models: [m, n], keys: ["plain-1", {key: obj-1, name: ci-bot, models: [m], expires_at: "2027-06-30T00:00:00Z"}]}
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	k := c.Teams[0].Keys
	if len(k) != 2 || k[0].Key != "plain-1" || k[1].Name != "ci-bot" || len(k[1].Models) != 1 || k[1].Expires() == nil {
		t.Fatalf("keys %+v", k)
	}
	for _, tc := range []struct{ teams, want string }{
		{`[{name: t, models: [m], keys: [{key: k2, models: [n]}]}]`, `teams[0].keys[0].models[0]: "n" is not in the team's models`},
		{`[{name: t, models: [m], keys: [{key: k2, expires_at: tomorrow}]}]`, `teams[0].keys[0].expires_at: "tomorrow" is not an RFC 3339 time`},
		{`[{name: t, models: [m], keys: [{key: k2, burst: 3}]}]`, `burst: unknown key`},
		{`[{name: t, models: [m], keys: [{key: k2, rpm: -1}]}]`, `teams[0].keys[0]: rpm, tpm, max_parallel and budget.usd must not be negative`},
		{`[{name: t, models: [m], keys: [{key: k2, budget: {usd: 1, alert_at: 2}}]}]`, `teams[0].keys[0].budget.alert_at: must be within (0, 1]`},
		{`[{name: t, models: [m], keys: [k2], user_limits: {tpm: -5}}]`, `teams[0].user_limits: rpm, tpm, max_parallel and budget.usd must not be negative`},
		{`[{name: t, models: [m], keys: [k2], user_limits: {rmp: 5}}]`, `rmp: unknown key`},
	} {
		_, err := Load([]byte(base+"teams: "+tc.teams+"\n"), nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.teams, err, tc.want)
		}
	}
}
