package config

import (
	"fmt"
	"math"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Strategies are the selection strategies of SPEC 5.
var Strategies = []string{"simple_shuffle", "round_robin", "least_busy", "latency", "cost", "usage", "adaptive"}

// Operations are the request operations of SPEC 1.
var Operations = []string{"chat", "embeddings", "images"}

// Reasons are the fallback reasons of SPEC 7.3.
var Reasons = []string{"general", "context_window", "content_policy"}

func oneOf(v string, set []string) bool {
	for _, s := range set {
		if v == s {
			return true
		}
	}
	return false
}

// Upper bounds of the sizes a node allocates or opens in full at start, so
// that a typo is a validation problem, not a node that dies allocating.
const (
	// MaxAuditEntries bounds audit.max_entries: the ring's records and the
	// audit writer's queue are made whole at start, and the stream and the
	// ring hold about 1 KB an entry.
	MaxAuditEntries = 100_000
	// MaxPoolSize bounds redis.pool_size: Warm opens and holds that many
	// connections to every Redis node at once (cluster.Conn.Warm).
	MaxPoolSize = 4096
)

// Validate checks a configuration after defaults and returns every problem,
// each naming its field and the fix. It is pure: it reads nothing else.
func Validate(c *Config) Problems {
	var p Problems
	add := func(format string, args ...any) { p = append(p, fmt.Sprintf(format, args...)) }

	if c.Server.Listen == "" {
		add("server.listen: must not be empty (e.g. \":8080\")")
	} else if _, _, err := net.SplitHostPort(c.Server.Listen); err != nil {
		// what serve listens on (TCP): check must refuse what serve cannot
		add("server.listen: %q is not host:port (e.g. \":8080\" or \"127.0.0.1:8080\")", clip(c.Server.Listen))
	}
	if id := c.Server.NodeID; len(id) > MaxNodeIDLen || !printableASCII(id) {
		// it starts every request id the node gives (X-Request-Id), which
		// clients send back as it came: printable ASCII, no spaces
		add("server.node_id: %q must be at most %d printable ASCII characters without spaces (it starts this node's request ids; default: the hostname)", clip(id), MaxNodeIDLen)
	}
	if m := c.Server.MetricsListen; m != "" {
		if _, _, err := net.SplitHostPort(m); err != nil {
			add("server.metrics_listen: %q is not host:port (e.g. \"127.0.0.1:9090\")", m)
		} else if m == c.Server.Listen {
			add("server.metrics_listen: %q is server.listen itself; leave it empty to serve /metrics there, or name another address", m)
		}
	}
	if _, err := ParseMemoryLimit(c.Server.MemoryLimitSpec); err != nil {
		add("server.memory_limit: %v", err)
	}
	if _, _, err := ParseProcs(c.Server.Procs); err != nil {
		add("server.procs: %v", err)
	}
	if g := c.Server.GCPercent; g < 20 || g > 1000 {
		add("server.gc_percent: must be between 20 and 1000 (default %d, Go's own; 70 trades throughput for memory), got %d", DefaultGCPercent, g)
	}
	if c.Server.MaxBodyBytes <= 0 {
		add("server.max_body_bytes: must be > 0, got %d", c.Server.MaxBodyBytes)
	}
	if c.Server.UpstreamTimeout <= 0 {
		add("server.upstream_timeout: must be > 0")
	}
	if c.Server.RequestTimeout <= 0 {
		add("server.request_timeout: must be > 0")
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"read_header_timeout", c.Server.ReadHeaderTimeout}, {"read_timeout", c.Server.ReadTimeout},
		{"write_timeout", c.Server.WriteTimeout}, {"idle_timeout", c.Server.IdleTimeout},
	} {
		if d.v <= 0 {
			add("server.%s: must be > 0, got %s", d.name, d.v)
		}
	}
	if n, b := c.Server.MaxInflightBodyBytes, c.Server.MaxBodyBytes; b > 0 && n < 2*b {
		add("server.max_inflight_body_bytes: must be at least twice server.max_body_bytes (%d), so one largest body always fits; got %d (0 = the default, min(16 x max_body_bytes, 256 MiB))", 2*b, n)
	}
	if c.Server.MaxMessages < 1 {
		add("server.max_messages: must be >= 1, got %d (default 10000)", c.Server.MaxMessages)
	}
	if c.Server.MaxInputItems < 1 {
		add("server.max_input_items: must be >= 1, got %d (default 2048)", c.Server.MaxInputItems)
	}
	var adminDigest [32]byte
	adminSet := false
	if k := c.Admin.Key; k != "" {
		if d, err := KeyDigest(k); err != nil {
			add("admin.key: %v (or give the key in clear)", err)
		} else {
			adminDigest, adminSet = d, true
		}
	}
	if c.Redis.URL != "" {
		// the URL may carry the Redis password: never quote it unredacted
		if u, err := url.Parse(c.Redis.URL); err != nil || (u.Scheme != "redis" && u.Scheme != "rediss") {
			add("redis.url: %q is not a redis:// or rediss:// URL", RedactURL(c.Redis.URL))
		}
	}
	if c.Redis.Timeout <= 0 {
		add("redis.timeout: must be > 0 (default 50ms)")
	}
	if c.Redis.SlotLease < 0 || (c.Redis.SlotLease > 0 && c.Redis.SlotLease < time.Second) {
		add("redis.slot_lease: must be at least 1s (default 30s; its node renews a slot every third of it), got %s", c.Redis.SlotLease)
	}
	if c.Redis.ExpectedReplicas < 0 {
		add("redis.expected_replicas: must be >= 0 (0 = the live node count from the heartbeats), got %d", c.Redis.ExpectedReplicas)
	}
	if c.Redis.PoolSize < 0 {
		add("redis.pool_size: must be >= 0 (0 = sized from the CPU count), got %d", c.Redis.PoolSize)
	} else if c.Redis.PoolSize > MaxPoolSize {
		add("redis.pool_size: at most %d connections per Redis node (each node opens and holds all of them at start; Redis accepts 10000 clients by default, for every replica together), got %d; leave it 0 to size it from the CPU count", MaxPoolSize, c.Redis.PoolSize)
	}

	providers := map[string]string{}
	for i, pr := range c.Providers {
		f := fmt.Sprintf("providers[%d]", i)
		if pr.Name == "" {
			add("%s.name: required", f)
		} else if _, dup := providers[pr.Name]; dup {
			add("%s.name: %q is used by another provider", f, pr.Name)
		}
		providers[pr.Name] = pr.Kind
		switch pr.Kind {
		case "openai", "anthropic":
			if pr.BaseURL == "" {
				add("%s.base_url: required for kind %s", f, pr.Kind)
			} else if u, err := url.Parse(pr.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				add("%s.base_url: %q is not an http(s) URL", f, RedactURL(pr.BaseURL))
			}
		case "gemini", "vertex":
			p = append(p, validateGoogle(pr, f)...)
		case "bedrock":
			validateBedrock(pr, f, add)
		case "simulated":
			s := pr.Simulate
			if !(s.ErrorRate >= 0 && s.ErrorRate <= 1) {
				add("%s.simulate.error_rate: must be within 0..1, got %g", f, s.ErrorRate)
			}
			if s.ErrorStatus < 400 || s.ErrorStatus > 599 {
				add("%s.simulate.error_status: must be an HTTP error status 400..599, got %d", f, s.ErrorStatus)
			}
			if !(s.TokensPerSecond >= 0) || s.OutputTokens < 0 || s.TTFB < 0 {
				add("%s.simulate: ttfb, tokens_per_second and output_tokens must not be negative", f)
			}
		case "":
			add("%s.kind: required (openai | anthropic | gemini | vertex | bedrock | simulated)", f)
		default:
			add("%s.kind: %q is not one of openai, anthropic, gemini, vertex, bedrock, simulated", f, pr.Kind)
		}
	}

	models := map[string][]string{} // public model -> operations served
	ids := map[string]bool{}
	for i, d := range c.Deployments {
		p = append(p, ValidateDeployment(d, fmt.Sprintf("deployments[%d]", i), providers)...)
		if d.ID != "" && ids[d.ID] {
			add("deployments[%d].id: %q is used by another deployment", i, d.ID)
		}
		ids[d.ID] = true
		models[d.Model] = append(models[d.Model], d.Operations...)
	}

	seenModels := map[string]bool{}
	for i, m := range c.Models {
		f := fmt.Sprintf("models[%d]", i)
		if m.Name == "" {
			add("%s.name: required", f)
		} else if seenModels[m.Name] {
			add("%s.name: %q configured twice", f, m.Name)
		}
		seenModels[m.Name] = true
		if _, ok := models[m.Name]; m.Name != "" && !ok {
			add("%s.name: %q has no deployment (add a deployment with model: %s)", f, m.Name, m.Name)
		}
		if !oneOf(m.Strategy, Strategies) {
			add("%s.strategy: %q is not one of %s", f, m.Strategy, strings.Join(Strategies, ", "))
		}
		if !oneOf(m.Objective, []string{"latency", "cost", "balanced"}) {
			add("%s.objective: %q is not one of latency, cost, balanced", f, m.Objective)
		}
	}
	if !oneOf(c.Routing.DefaultStrategy, Strategies) {
		add("routing.default_strategy: %q is not one of %s", c.Routing.DefaultStrategy, strings.Join(Strategies, ", "))
	}

	aliases := map[string]bool{}
	for i, r := range c.SmartRouting.Routes {
		f := fmt.Sprintf("smart_routing.routes[%d]", i)
		if r.Alias == "" {
			add("%s.alias: required", f)
		} else if why := badModelName(r.Alias); why != "" {
			add("%s.alias: %s", f, why)
		} else if aliases[r.Alias] {
			add("%s.alias: %q routed twice", f, r.Alias)
		} else if _, ok := models[r.Alias]; ok {
			add("%s.alias: %q is also a deployment's public model; pick another alias", f, r.Alias)
		}
		aliases[r.Alias] = true
		for _, t := range []struct{ field, name string }{{"easy", r.Easy}, {"hard", r.Hard}} {
			if t.name == "" {
				add("%s.%s: required", f, t.field)
			} else if _, ok := models[t.name]; !ok {
				add("%s.%s: %q has no deployment", f, t.field, t.name)
			}
		}
		if r.DefaultTier != "easy" && r.DefaultTier != "hard" {
			add("%s.default_tier: %q is not easy or hard", f, r.DefaultTier)
		}
	}
	if c.SmartRouting.Threshold < 1 {
		add("smart_routing.threshold: must be >= 1, got %d", c.SmartRouting.Threshold)
	}
	if c.SmartRouting.SessionTTL <= 0 {
		add("smart_routing.session_ttl: must be > 0")
	}
	known := DefaultPoints()
	for k, v := range c.SmartRouting.Points {
		if _, ok := known[k]; !ok {
			add("smart_routing.points.%s: unknown signal (known: code, context_2k, context_8k, context_32k, tools, many_tools, tool_results, reasoning_words, math, deep_conversation, structured_output, long_output)", k)
		}
		if v < 0 {
			add("smart_routing.points.%s: must not be negative", k)
		}
	}

	seenTeams := map[string]bool{}
	seenKeys := map[[32]byte]string{} // by digest: clear and sha256: forms are one key
	for i, t := range c.Teams {
		f := fmt.Sprintf("teams[%d]", i)
		if t.Name == "" {
			add("%s.name: required", f)
		} else if !ValidTeamName(t.Name) {
			add("%s.name: %q must be 1 to %d bytes of text without '/', '{', '}' or control characters, and not \".\" or \"..\" (the admin API addresses it as /admin/teams/{name}; letters, digits, '.', '_' and '-' are safest)", f, clip(t.Name), MaxTeamNameLen)
		} else if seenTeams[t.Name] {
			add("%s.name: %q configured twice", f, t.Name)
		}
		seenTeams[t.Name] = true
		if len(t.Keys) == 0 {
			add("%s.keys: at least one key required", f)
		}
		teamModels := map[string]bool{}
		for _, m := range t.Models {
			teamModels[m] = true
		}
		inTeam := map[[32]byte]int{} // digest -> index of its first entry in this team
		for j, ks := range t.Keys {
			kf := fmt.Sprintf("%s.keys[%d]", f, j)
			key := ks.Key
			if n := len(strings.TrimSpace(ks.Name)); n > MaxTeamNameLen {
				add("%s.name: %d characters; at most %d (what the key is for, e.g. \"ci\")", kf, n, MaxTeamNameLen)
			}
			if ks.ExpiresAt != "" && ks.Expires() == nil {
				add("%s.expires_at: %q is not an RFC 3339 time such as 2027-06-30T00:00:00Z", kf, ks.ExpiresAt)
			}
			checkLimits(add, kf, ks.Level())
			for mi, m := range ks.Models {
				switch {
				case teamModels[m]:
				case !teamModels["*"]:
					add("%s.models[%d]: %q is not in the team's models: a key can only narrow its team's allowlist", kf, mi, m)
				case m != "*" && !served(models, m) && !aliases[m]:
					// the team allows all: a name nothing serves (a typo)
					// would leave the key able to call nothing
					add("%s.models[%d]: %q is neither a deployment's public model nor a tier alias", kf, mi, m)
				}
			}
			if key == "" {
				add("%s: empty (is its ${ENV} variable set?)", kf)
				continue
			}
			d, err := KeyDigest(key)
			if err != nil {
				add("%s: %v", kf, err)
				continue
			}
			if adminSet && d == adminDigest {
				// the admin key is separate from team keys (SPEC 11): a
				// team key equal to it would open the admin API to the team
				add("%s: the same key is admin.key (in clear, as sha256: or in another case of hex): the admin key must not be a team key", kf)
				continue
			}
			if first, dup := inTeam[d]; dup {
				if !sameKeySettings(t.Keys[first], ks) {
					// only the first entry of a key counts (catalog
					// configKeys): the other's settings would be dropped
					add("%s: the same key is already %s.keys[%d], with other settings (name, models, expires_at or limits): give each key once", kf, f, first)
				}
				continue
			}
			inTeam[d] = j
			if other, dup := seenKeys[d]; dup && other != t.Name {
				add("%s: the same key (in clear, as sha256: or in another case of hex) is also given to team %q: a key names one team", kf, other)
				continue
			}
			seenKeys[d] = t.Name
		}
		for j, m := range t.Models {
			if m == "*" {
				continue
			}
			if _, ok := models[m]; !ok && !aliases[m] {
				add("%s.models[%d]: %q is neither a deployment's public model nor a tier alias", f, j, m)
			}
		}
		checkLimits(add, f, t.Level())
		checkLimits(add, f+".user_limits", t.UserLimits)
	}

	r := c.Routing
	if !finite(r.LatencyBuffer) || r.LatencyBuffer < 0 {
		add("routing.latency_buffer: must not be negative (and must be a number)")
	}
	if r.RetryAfter < 0 {
		add("routing.retry_after: must not be negative")
	}
	for op, modes := range r.MaxAttempts {
		if !oneOf(op, Operations) {
			add("routing.max_attempts.%s: unknown operation (chat, embeddings, images)", op)
		}
		for mode, n := range modes {
			if mode != "sync" && mode != "stream" {
				add("routing.max_attempts.%s.%s: unknown mode (sync, stream)", op, mode)
			}
			if n < 1 {
				add("routing.max_attempts.%s.%s: must be >= 1, got %d", op, mode, n)
			}
		}
	}
	if r.CooldownBase <= 0 {
		add("routing.cooldown_base: must be > 0")
	}
	if r.CooldownMax < r.CooldownBase {
		add("routing.cooldown_max: must be >= cooldown_base (%s)", r.CooldownBase)
	}
	if r.FailuresBeforeCooldown < 1 {
		add("routing.failures_before_cooldown: must be >= 1")
	}
	if r.ProbeInterval < 0 {
		add("routing.probe_interval: must not be negative")
	}
	if !(r.MinWeightFraction >= 0 && r.MinWeightFraction <= 1) {
		add("routing.min_weight_fraction: must be within 0..1")
	}
	if r.EWMADecay <= 0 {
		add("routing.ewma_decay: must be > 0")
	}
	if !finite(r.WarmCacheWeight) || r.WarmCacheWeight < 1 {
		add("routing.warm_cache_weight: must be a number >= 1")
	}
	if r.DefaultMaxTokens < 1 {
		add("routing.default_max_tokens: must be >= 1")
	}
	for i, m := range r.FallbackModels {
		if _, ok := models[m]; !ok {
			add("routing.fallback_models[%d]: %q has no deployment", i, m)
		}
	}
	chains := map[[2]string]int{} // (primary, reason) -> index of its first chain
	for i, fb := range r.Fallbacks {
		for _, e := range ValidateFallback(fb.Primary, fb.Reason, fb.Models, models) {
			add("routing.fallbacks[%d].%s", i, e)
		}
		k := [2]string{fb.Primary, fb.Reason}
		if first, dup := chains[k]; dup {
			add("routing.fallbacks[%d]: primary %q with reason %s is already routing.fallbacks[%d]: one chain per (primary, reason); merge their models", i, fb.Primary, fb.Reason, first)
			continue
		}
		chains[k] = i
	}
	if c.Audit.MaxEntries < 1 {
		add("audit.max_entries: must be >= 1")
	} else if c.Audit.MaxEntries > MaxAuditEntries {
		add("audit.max_entries: at most %d (the node allocates its ring and its writer's queue for all of them at start, and a lookup walks the whole stream), got %d; the structured log keeps every entry (default 10000)", MaxAuditEntries, c.Audit.MaxEntries)
	}
	if c.Responses.StoreTTL <= 0 {
		add("responses.store_ttl: must be a positive duration (e.g. 24h)")
	}
	if c.Responses.MaxLocal < 1 {
		add("responses.max_local: must be >= 1")
	}
	if c.Responses.MaxLocalBytes < 1 {
		add("responses.max_local_bytes: must be >= 1")
	}
	if c.Responses.MaxTeamBytes < 1 {
		add("responses.max_team_bytes: must be >= 1")
	}
	p = append(p, validateTracing(c.Tracing)...)
	p = append(p, validateCache(c)...)
	return p
}

// validateTracing checks the tracing section (SPEC 12.5, 13).
func validateTracing(t Tracing) Problems {
	var p Problems
	if !(t.SampleRatio >= 0 && t.SampleRatio <= 1) {
		p = append(p, fmt.Sprintf("tracing.sample_ratio: must be within 0..1, got %g", t.SampleRatio))
	}
	if t.OTLPEndpoint == "" {
		return p
	}
	if t.ServiceName == "" {
		p = append(p, "tracing.service_name: must not be empty when tracing.otlp_endpoint is set (e.g. \"switchyard\")")
	}
	u, err := url.Parse(t.OTLPEndpoint)
	switch {
	case err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https"):
		// the value is not echoed: a mistyped URL may hold a credential
		p = append(p, "tracing.otlp_endpoint: must be an http:// or https:// URL of an OTLP/HTTP collector, e.g. http://otel-collector:4318")
	case u.User != nil:
		p = append(p, "tracing.otlp_endpoint: must not carry credentials in the URL; set OTEL_EXPORTER_OTLP_HEADERS (e.g. \"authorization=Bearer ...\") instead")
	case u.RawQuery != "" || u.Fragment != "":
		p = append(p, "tracing.otlp_endpoint: must not have a query or fragment (headers go in OTEL_EXPORTER_OTLP_HEADERS)")
	}
	return p
}

// ValidateDeployment checks one deployment (config file or admin PUT body)
// against the known providers (name -> kind).
func ValidateDeployment(d Deployment, f string, providers map[string]string) Problems {
	var p Problems
	add := func(format string, args ...any) { p = append(p, fmt.Sprintf(format, args...)) }
	if d.ID == "" {
		add("%s.id: required", f)
	} else if len(d.ID) > MaxDeploymentIDLen {
		add("%s.id: %d bytes; at most %d", f, len(d.ID), MaxDeploymentIDLen)
	} else if strings.ContainsAny(d.ID, "/ ?#{}") || hasControl(d.ID) {
		// braces would end or open the hash tag of its Redis keys ({dep:<id>})
		add("%s.id: %q must not contain '/', '?', '#', '{', '}', spaces or control characters", f, d.ID)
	}
	if d.Model == "" {
		add("%s.model: required (the public model name clients send)", f)
	} else if why := badModelName(d.Model); why != "" {
		add("%s.model: %s", f, why)
	}
	if d.Provider == "" {
		add("%s.provider: required", f)
	} else if _, ok := providers[d.Provider]; !ok {
		add("%s.provider: %q is not a configured provider", f, d.Provider)
	}
	for j, op := range d.Operations {
		if !oneOf(op, Operations) {
			add("%s.operations[%d]: %q is not one of chat, embeddings, images", f, j, op)
		}
	}
	// NaN and the infinities are refused with the negatives: a NaN price
	// makes every cost NaN, and a NaN spend never reaches a budget
	if !price(d.Price.Input) || !price(d.Price.Output) {
		add("%s.price: must not be negative (and must be a number)", f)
	}
	if c := d.Price.CachedInput; c != nil && !price(*c) {
		add("%s.price.cached_input: must not be negative (and must be a number)", f)
	}
	if c := d.Price.CacheWrite; c != nil && !price(*c) {
		add("%s.price.cache_write: must not be negative (and must be a number)", f)
	}
	if d.RPM < 0 || d.TPM < 0 {
		add("%s: rpm and tpm must not be negative", f)
	}
	if !finite(d.Weight) || d.Weight < 0 {
		add("%s.weight: must not be negative (and must be a number)", f)
	}
	if d.MaxContextTokens < 0 {
		add("%s.max_context_tokens: must not be negative", f)
	}
	return p
}

// ValidateFallback checks one chain against the public models and the
// operations their deployments serve (SPEC 11). Each problem starts with the
// field it names.
func ValidateFallback(primary, reason string, targets []string, models map[string][]string) []string {
	var p []string
	add := func(format string, args ...any) { p = append(p, fmt.Sprintf(format, args...)) }
	if primary == "" {
		add("primary: required")
	} else if _, ok := models[primary]; !ok {
		add("primary: %q has no deployment", primary)
	}
	if !oneOf(reason, Reasons) {
		add("reason: %q is not one of general, context_window, content_policy", reason)
	}
	if len(targets) < 1 || len(targets) > 5 {
		add("models: needs 1 to 5 fallback models, got %d", len(targets))
	}
	seen := map[string]bool{}
	for i, t := range targets {
		switch {
		case t == primary:
			add("models[%d]: %q is the primary itself", i, t)
		case seen[t]:
			add("models[%d]: %q is listed twice", i, t)
		default:
			if ops, ok := models[t]; !ok {
				add("models[%d]: %q has no deployment", i, t)
			} else if !sharesOperation(ops, models[primary]) && models[primary] != nil {
				add("models[%d]: %q shares no operation with %q", i, t, primary)
			}
		}
		seen[t] = true
	}
	return p
}

func sharesOperation(a, b []string) bool {
	for _, x := range a {
		if oneOf(x, b) {
			return true
		}
	}
	return false
}

// served reports whether a deployment serves the public model m.
func served(models map[string][]string, m string) bool { _, ok := models[m]; return ok }

// IsReason reports whether r is a fallback reason of SPEC 7.3.
func IsReason(r string) bool { return oneOf(r, Reasons) }

// checkLimits reports the problems of one level's limits (SPEC 3.1), f
// naming where they are.
func checkLimits(add func(string, ...any), f string, l Limits) {
	if l.RPM < 0 || l.TPM < 0 || l.MaxParallel < 0 || !price(l.Budget.USD) {
		add("%s: rpm, tpm, max_parallel and budget.usd must not be negative (0 = no limit); budget.usd must be a number", f)
	}
	if a := l.Budget.AlertAt; !(a > 0 && a <= 1) {
		add("%s.budget.alert_at: must be within (0, 1] (a share of budget.usd), got %g", f, a)
	}
	if l.Budget.Period.Calendar == "" && l.Budget.Period.Every <= 0 {
		add("%s.budget.period: must be daily, weekly, monthly or a positive duration", f)
	}
}

// Bounds of the names that reach metric labels, response headers, audit
// entries, URLs and Redis keys (SPEC 11, 12.1).
const (
	// MaxTeamNameLen bounds team and key names: the admin API's bound
	// (catalog's maxNameLen), so a file seeds no team it cannot address.
	MaxTeamNameLen = 64
	// MaxDeploymentIDLen bounds a deployment's id.
	MaxDeploymentIDLen = 128
	// MaxModelNameLen bounds a public model name or a tier alias.
	MaxModelNameLen = 256
)

// ValidTeamName reports whether a file may name a team s: 1 to
// MaxTeamNameLen bytes of UTF-8 text without control characters, that an
// admin URL can address as one path segment (no '/', not "." or "..",
// which clients resolve away as dot segments) and that stays inside the
// Redis Cluster hash tag of its keys (no '{' or '}': {team:<name>}). The
// admin API creates teams from a narrower alphabet (catalog's validName).
func ValidTeamName(s string) bool {
	return s != "" && len(s) <= MaxTeamNameLen && s != "." && s != ".." &&
		!strings.ContainsAny(s, "/{}") && !hasControl(s)
}

// badModelName says what is wrong with a public model name or alias ("" when
// nothing is): too long, not UTF-8 text, or holding control characters.
func badModelName(s string) string {
	switch {
	case len(s) > MaxModelNameLen:
		return fmt.Sprintf("%d bytes; at most %d", len(s), MaxModelNameLen)
	case hasControl(s):
		return fmt.Sprintf("%q must be UTF-8 text without control characters", clip(s))
	}
	return ""
}

// hasControl reports whether s is not UTF-8 text or holds a control
// character (C0, DEL or C1): a name with a newline forges log and
// exposition lines wherever it is written unescaped.
func hasControl(s string) bool {
	if !utf8.ValidString(s) {
		return true
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return true
		}
	}
	return false
}

// MaxNodeIDLen bounds server.node_id: a request id the node gives is it
// and about 16 more bytes, and one a client sends is taken up to 128.
const MaxNodeIDLen = 64

// printableASCII reports whether s is only printable ASCII without spaces
// (what the gateway takes as a client's X-Request-Id).
func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// clip shortens a value quoted in a problem.
func clip(s string) string {
	if len(s) <= 80 {
		return s
	}
	return s[:80] + "..."
}

// sameKeySettings reports whether two entries of one key set the same
// name, models, expiry and limits (so giving the key twice loses nothing).
func sameKeySettings(a, b KeySpec) bool {
	return a.Name == b.Name && slices.Equal(a.Models, b.Models) && a.ExpiresAt == b.ExpiresAt &&
		a.Level() == b.Level()
}

// finite reports whether x is a number (not NaN, not an infinity): YAML
// reads .nan and .inf, and an environment override "NaN", as floats, and
// NaN passes every comparison a range check makes.
func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// price reports whether x is a usable price or amount in USD: finite and
// not negative.
func price(x float64) bool { return finite(x) && x >= 0 }
