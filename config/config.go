// Package config owns Switchyard's configuration schema (SPEC 13): the YAML
// types with their defaults, loading through koanf (file, SWITCHYARD_* env
// overrides, ${ENV} secrets) and validation that reports every problem at
// once. It knows nothing about HTTP, Redis or routing decisions.
package config

import "time"

// Config is the whole configuration file.
type Config struct {
	Server       Server       `koanf:"server"`
	DataDir      string       `koanf:"data_dir"` // local state file directory when Redis is not configured
	Admin        Admin        `koanf:"admin"`
	Redis        Redis        `koanf:"redis"`
	Providers    []Provider   `koanf:"providers"`
	Deployments  []Deployment `koanf:"deployments"`
	Models       []Model      `koanf:"models"`
	Teams        []Team       `koanf:"teams"`
	Routing      Routing      `koanf:"routing"`
	SmartRouting SmartRouting `koanf:"smart_routing"`
	Audit        Audit        `koanf:"audit"`
	Tracing      Tracing      `koanf:"tracing"`
	Responses    Responses    `koanf:"responses"`
	Cache        Cache        `koanf:"cache"` // SPEC 18 (cache.go)
}

// Server configures the HTTP edge. The timeouts and shape limits bound what
// a hostile client can make the gateway hold (SPEC 14).
type Server struct {
	Listen string `koanf:"listen"`  // address to listen on; default ":8080"
	NodeID string `koanf:"node_id"` // default: hostname
	// MetricsListen, when set, is the only address /metrics is served on
	// (team names, tokens and spend are not for every client, SPEC 12.1);
	// empty serves it on Listen. Changing it needs a restart.
	MetricsListen   string        `koanf:"metrics_listen"`
	MaxBodyBytes    int64         `koanf:"max_body_bytes"`   // request body limit; default 10 MiB
	UpstreamTimeout time.Duration `koanf:"upstream_timeout"` // per attempt, until the first byte; default 60s
	RequestTimeout  time.Duration `koanf:"request_timeout"`  // whole request; default 10m
	// ReadHeaderTimeout bounds reading a request's headers; default 10s.
	ReadHeaderTimeout time.Duration `koanf:"read_header_timeout"`
	// ReadTimeout bounds reading a request body, from the first body read
	// to its end; default 30s.
	ReadTimeout time.Duration `koanf:"read_timeout"`
	// WriteTimeout cuts off a client that accepts no response bytes for this
	// long (it is renewed before every write, so a long stream that the
	// client reads is never cut); default 30s.
	WriteTimeout time.Duration `koanf:"write_timeout"`
	// IdleTimeout closes a keep-alive connection idle this long; default 120s.
	IdleTimeout time.Duration `koanf:"idle_timeout"`
	// MaxMessages is the most chat messages one request may carry; default 10000.
	MaxMessages int `koanf:"max_messages"`
	// MaxInputItems is the most embedding inputs one request may carry; default 2048.
	MaxInputItems int `koanf:"max_input_items"`
	// MaxInflightBodyBytes bounds the request-body bytes the whole node
	// holds at once (SPEC 14), counted as the bytes that really arrived
	// (the body buffers' size), never as Content-Length announces them. A
	// body that would pass it is answered 503 with Retry-After. 0 (the
	// default) is DefaultMaxInflightBodyBytes(MaxBodyBytes); set, it must be
	// at least twice MaxBodyBytes, so one largest body always fits.
	MaxInflightBodyBytes int64 `koanf:"max_inflight_body_bytes"`
	// MemoryLimitSpec is the Go runtime's soft memory limit: "auto" (the
	// default: 90% of the container's cgroup limit, none without one),
	// "off", or a size such as "512MiB" (MemoryLimit). GOMEMLIMIT in the
	// environment wins over it. Changing it needs a restart.
	MemoryLimitSpec string `koanf:"memory_limit"`
	// Procs is how many CPUs the Go runtime runs the node's goroutines on
	// (GOMAXPROCS): "adaptive" (the default: one while the node uses less
	// than one, the runtime's own choice as soon as it needs more), "auto"
	// (the runtime's own choice: the CPUs the process may use, or its
	// container's CPU limit) or a number (ParseProcs). GOMAXPROCS in the
	// environment wins over it. Changing it needs a restart.
	Procs string `koanf:"procs"`
	// GCPercent is the Go collector's GOGC for a large heap: the heap may
	// grow this many percent past what was live at the last collection,
	// and at least 32 MiB (a small heap is not collected more often than
	// at Go's default; the node retunes it every second). Default 100, Go's
	// own: most of a node's heap is long-lived state (the catalog's keys,
	// the per-team records) and the heap grows to twice it; 70 holds a node
	// with 10,000 teams or 100,000 keys under 150 MB RSS for 7-10% of its
	// throughput (DefaultGCPercent). GOGC in the environment wins over it.
	// Changing it needs a restart.
	GCPercent int `koanf:"gc_percent"`
}

// DefaultMaxInflightBodyBytes is server.max_inflight_body_bytes when it is
// 0: 16 largest bodies or 256 MiB, whichever is smaller, and never less
// than two largest bodies.
func DefaultMaxInflightBodyBytes(maxBody int64) int64 {
	return max(min(16*maxBody, 256<<20), 2*maxBody)
}

// Admin configures the admin API (SPEC 11).
type Admin struct {
	Key string `koanf:"key"` // admin bearer key; the admin API is off when empty
}

// Redis configures the shared store (SPEC 9). Empty URL and Addrs means local-only.
type Redis struct {
	URL              string        `koanf:"url"`               // redis:// or rediss://
	Addrs            []string      `koanf:"addrs"`             // Cluster, or Sentinel with MasterName
	MasterName       string        `koanf:"master_name"`       // Sentinel master
	Timeout          time.Duration `koanf:"timeout"`           // bound on any request-path call; default 50ms
	SlotLease        time.Duration `koanf:"slot_lease"`        // a max_parallel slot's lease, renewed by its node while the request runs; a dead node's slots come back within it; default 30s
	KeyPrefix        string        `koanf:"key_prefix"`        // default "switchyard:"
	ExpectedReplicas int           `koanf:"expected_replicas"` // local fallback divides limits by it; default 1; 0 = the live node count of the last heartbeats
	PoolSize         int           `koanf:"pool_size"`         // connections per Redis node, opened before the node is ready; default 0 = max(64, 16 per CPU)
}

// Enabled reports whether a Redis server is configured.
func (r Redis) Enabled() bool { return r.URL != "" || len(r.Addrs) > 0 }

// Provider is an upstream account or endpoint.
type Provider struct {
	Name     string            `koanf:"name"`     // required, unique
	Kind     string            `koanf:"kind"`     // openai | anthropic | gemini | vertex | bedrock | simulated
	BaseURL  string            `koanf:"base_url"` // API root, e.g. https://host/v1 (vertex: scheme and host only)
	APIKey   string            `koanf:"api_key"`  // secret; never logged
	Region   string            `koanf:"region"`   // vertex: a location such as europe-west4, or global; bedrock: e.g. us-east-1
	Headers  map[string]string `koanf:"headers"`  // extra upstream headers
	Simulate Simulate          `koanf:"simulate"` // kind simulated only

	// Vertex AI (SPEC 10): the Google Cloud project, and the service-account
	// key as a file path or as the key JSON itself (a secret, written as
	// ${ENV}); with neither, Application Default Credentials.
	Project         string `koanf:"project"`
	CredentialsFile string `koanf:"credentials_file"`
	CredentialsJSON string `koanf:"credentials_json"` // secret; never logged

	// AWS credentials of a bedrock provider, for SigV4 (SPEC 10): secrets,
	// never logged. All three empty means the AWS default credential chain
	// (environment, shared files, web identity, container and instance
	// roles); a set APIKey (a Bedrock API key, sent as Bearer) replaces
	// SigV4 altogether.
	AWSAccessKeyID     string `koanf:"aws_access_key_id"`
	AWSSecretAccessKey string `koanf:"aws_secret_access_key"`
	AWSSessionToken    string `koanf:"aws_session_token"` // optional, with temporary keys

	// ForwardHeaders names client request headers passed through to this
	// provider (SPEC 10, 15); credential and hop-by-hop headers never are.
	ForwardHeaders []string `koanf:"forward_headers"`
}

// Simulate is the profile of a simulated provider (and of switchyard mockllm).
type Simulate struct {
	TTFB               time.Duration `koanf:"ttfb"`                 // time to first byte; default 20ms
	TokensPerSecond    float64       `koanf:"tokens_per_second"`    // stream pace; default 500
	OutputTokens       int           `koanf:"output_tokens"`        // tokens per answer; default 16
	ErrorRate          float64       `koanf:"error_rate"`           // 0..1
	ErrorStatus        int           `koanf:"error_status"`         // default 503
	ContextTokens      int           `koanf:"context_tokens"`       // default 128000
	ContentPolicyWords []string      `koanf:"content_policy_words"` // prompt containing one fails with a content-policy error
	EmbeddingDims      int           `koanf:"embedding_dims"`       // default 8
}

// Price is USD per million tokens (SPEC 10.2). CachedInput and CacheWrite
// are optional: nil (unset) means the Input price, which is not the same as
// an explicit 0 (a free cache read).
type Price struct {
	Input       float64  `koanf:"input" json:"input"`                         // uncached input tokens
	Output      float64  `koanf:"output" json:"output"`                       // output tokens, reasoning included
	CachedInput *float64 `koanf:"cached_input" json:"cached_input,omitempty"` // input read from the provider's prompt cache; default: Input
	CacheWrite  *float64 `koanf:"cache_write" json:"cache_write,omitempty"`   // input written to the prompt cache; default: Input
}

// CachedInputUSD is the effective cached_input price: Input when unset.
func (p Price) CachedInputUSD() float64 {
	if p.CachedInput != nil {
		return *p.CachedInput
	}
	return p.Input
}

// CacheWriteUSD is the effective cache_write price: Input when unset.
func (p Price) CacheWriteUSD() float64 {
	if p.CacheWrite != nil {
		return *p.CacheWrite
	}
	return p.Input
}

// Deployment is one concrete upstream model on one provider. Its JSON form is
// the admin API body (SPEC 11), with the same field names as the YAML.
type Deployment struct {
	ID               string   `koanf:"id" json:"id"`                                   // required, unique
	Model            string   `koanf:"model" json:"model"`                             // public model (pool) it serves; required
	Provider         string   `koanf:"provider" json:"provider"`                       // required
	UpstreamModel    string   `koanf:"upstream_model" json:"upstream_model,omitempty"` // default: Model
	Operations       []string `koanf:"operations" json:"operations,omitempty"`         // chat | embeddings | images; default [chat]
	Price            Price    `koanf:"price" json:"price"`
	RPM              int64    `koanf:"rpm" json:"rpm,omitempty"` // own quota, cluster-wide; 0 = none
	TPM              int64    `koanf:"tpm" json:"tpm,omitempty"`
	Weight           float64  `koanf:"weight" json:"weight,omitempty"`                         // default 1
	MaxContextTokens int      `koanf:"max_context_tokens" json:"max_context_tokens,omitempty"` // 0 = unknown
	SupportsTools    *bool    `koanf:"supports_tools" json:"supports_tools,omitempty"`         // default true
	ImageSizes       []string `koanf:"image_sizes" json:"image_sizes,omitempty"`               // images: sizes served; empty = any
	Enabled          *bool    `koanf:"enabled" json:"enabled,omitempty"`                       // default true
}

// IsEnabled reports the effective enabled flag.
func (d Deployment) IsEnabled() bool { return d.Enabled == nil || *d.Enabled }

// ToolsSupported reports the effective supports_tools flag.
func (d Deployment) ToolsSupported() bool { return d.SupportsTools == nil || *d.SupportsTools }

// Model configures a public model's routing.
type Model struct {
	Name      string     `koanf:"name"`
	Strategy  string     `koanf:"strategy"`  // default routing.default_strategy
	Objective string     `koanf:"objective"` // adaptive only: latency | cost | balanced (default)
	Cache     ModelCache `koanf:"cache"`     // SPEC 18; default: the global cache settings
}

// Team is a group of API keys with an allowlist and limits.
type Team struct {
	Name        string    `koanf:"name"`
	Keys        []KeySpec `koanf:"keys"`   // clear keys or "sha256:<hex>", plain or as objects
	Models      []string  `koanf:"models"` // allowlist; "*" allows all
	RPM         int64     `koanf:"rpm"`    // 0 = unlimited
	TPM         int64     `koanf:"tpm"`
	MaxParallel int64     `koanf:"max_parallel"`
	Budget      Budget    `koanf:"budget"`
	// RequireUser refuses a request that names no end user (400
	// user_required, SPEC 3.1).
	RequireUser bool `koanf:"require_user"`
	// UserLimits apply to each end user of the team separately (SPEC 3.1);
	// zero: no user level.
	UserLimits Limits    `koanf:"user_limits"`
	Cache      TeamCache `koanf:"cache"` // SPEC 18; default: the global cache switch
}

// Level is the team's own limits as a Limits value.
func (t *Team) Level() Limits {
	return Limits{RPM: t.RPM, TPM: t.TPM, MaxParallel: t.MaxParallel, Budget: t.Budget}
}

// Limits are one level's limits (SPEC 3.1: team, key or end user), with
// the semantics of SPEC 3; a zero field sets no limit.
type Limits struct {
	RPM         int64  `koanf:"rpm"`
	TPM         int64  `koanf:"tpm"`
	MaxParallel int64  `koanf:"max_parallel"`
	Budget      Budget `koanf:"budget"`
}

// Any reports whether l sets any limit.
func (l *Limits) Any() bool {
	return l != nil && (l.RPM > 0 || l.TPM > 0 || l.MaxParallel > 0 || l.Budget.USD > 0)
}

// KeySpec is one key of a team in the file (SPEC 3.1): a plain string (the
// key in clear or as sha256:<hex>) or an object that also names it, narrows
// the team's allowlist and sets an expiry.
type KeySpec struct {
	Key       string   `koanf:"key"`        // required: in clear (${ENV}) or sha256:<hex>
	Name      string   `koanf:"name"`       // what the key is for (default "config key N")
	Models    []string `koanf:"models"`     // narrows the team's allowlist; empty = the team's
	ExpiresAt string   `koanf:"expires_at"` // RFC 3339; empty = never
	// The key level's own limits (SPEC 3.1); omitted: none at this level.
	RPM         int64  `koanf:"rpm"`
	TPM         int64  `koanf:"tpm"`
	MaxParallel int64  `koanf:"max_parallel"`
	Budget      Budget `koanf:"budget"`
}

// Level is the key's own limits.
func (k KeySpec) Level() Limits {
	return Limits{RPM: k.RPM, TPM: k.TPM, MaxParallel: k.MaxParallel, Budget: k.Budget}
}

// PlainKeys is keys as plain-string KeySpecs (no name, models or expiry).
func PlainKeys(keys ...string) []KeySpec {
	out := make([]KeySpec, len(keys))
	for i, k := range keys {
		out[i] = KeySpec{Key: k}
	}
	return out
}

// Expires is the key's expiry, or nil when it has none or it does not parse
// (Validate reports that).
func (k KeySpec) Expires() *time.Time {
	if k.ExpiresAt == "" {
		return nil
	}
	t, err := time.Parse(time.RFC3339, k.ExpiresAt)
	if err != nil {
		return nil
	}
	t = t.UTC()
	return &t
}

// Budget is a spend limit per period.
type Budget struct {
	USD    float64 `koanf:"usd"`    // 0 = none
	Period Period  `koanf:"period"` // daily, weekly, monthly (UTC) or a duration; default 720h
	// AlertAt is the share of USD whose crossing in a period is logged and
	// counted once (SPEC 3.1); default 0.8.
	AlertAt float64 `koanf:"alert_at"`
}

// DefaultBudgetPeriod is a budget's period when it names none (SPEC 13).
var DefaultBudgetPeriod = Period{Every: 720 * time.Hour}

// ApplyDefaults sets alert_at 0.8 and period 720h where they are unset.
func (b *Budget) ApplyDefaults() {
	if b.AlertAt == 0 {
		b.AlertAt = DefaultAlertAt
	}
	if b.Period.IsZero() {
		b.Period = DefaultBudgetPeriod
	}
}

// Routing configures selection, health, failover and fallbacks (SPEC 5-7).
type Routing struct {
	DefaultStrategy        string                    `koanf:"default_strategy"`
	LatencyBuffer          float64                   `koanf:"latency_buffer"`
	RetryAfter             time.Duration             `koanf:"retry_after"`
	MaxAttempts            map[string]map[string]int `koanf:"max_attempts"` // operation -> mode -> attempts
	CooldownBase           time.Duration             `koanf:"cooldown_base"`
	CooldownMax            time.Duration             `koanf:"cooldown_max"`
	FailuresBeforeCooldown int                       `koanf:"failures_before_cooldown"`
	ProbeInterval          time.Duration             `koanf:"probe_interval"` // 0 = a fifth of the current cooldown
	LastResort             bool                      `koanf:"last_resort"`
	MinWeightFraction      float64                   `koanf:"min_weight_fraction"`
	EWMADecay              time.Duration             `koanf:"ewma_decay"`
	WarmCacheTTL           time.Duration             `koanf:"warm_cache_ttl"`
	WarmCacheWeight        float64                   `koanf:"warm_cache_weight"`
	SessionKeeping         bool                      `koanf:"session_keeping"`
	DefaultMaxTokens       int                       `koanf:"default_max_tokens"`
	FallbackModels         []string                  `koanf:"fallback_models"`
	Fallbacks              []Fallback                `koanf:"fallbacks"`
}

// Fallback is one configured chain.
type Fallback struct {
	Primary string   `koanf:"primary"`
	Reason  string   `koanf:"reason"` // general | context_window | content_policy
	Models  []string `koanf:"models"`
}

// SmartRouting configures tier routing (SPEC 4).
type SmartRouting struct {
	Threshold  int            `koanf:"threshold"`
	SessionTTL time.Duration  `koanf:"session_ttl"`
	Points     map[string]int `koanf:"points"`
	Routes     []TierRoute    `koanf:"routes"`
}

// TierRoute is one alias rewritten to an easy or a hard target.
type TierRoute struct {
	Alias       string `koanf:"alias"`
	Easy        string `koanf:"easy"`
	Hard        string `koanf:"hard"`
	DefaultTier string `koanf:"default_tier"` // easy (default) | hard
}

// Audit configures the audit log.
type Audit struct {
	MaxEntries int `koanf:"max_entries"` // ring size or stream length; default 10000
}

// Tracing configures OpenTelemetry traces (SPEC 12.5). Tracing is off, and
// costs nothing on the request path, while OTLPEndpoint is empty.
type Tracing struct {
	// OTLPEndpoint is the OTLP/HTTP collector, e.g. http://otel-collector:4318
	// (the path defaults to /v1/traces); empty = tracing off (the default).
	OTLPEndpoint string `koanf:"otlp_endpoint"`
	// SampleRatio is the share of traces started here that are kept, 0..1,
	// decided by trace id; a caller's sampled traceparent is honoured. Default 1.0.
	SampleRatio float64 `koanf:"sample_ratio"`
	// ServiceName is the service.name resource attribute; default "switchyard".
	ServiceName string `koanf:"service_name"`
}

// Enabled reports whether traces are exported.
func (t Tracing) Enabled() bool { return t.OTLPEndpoint != "" }

// Responses configures the Responses API response store (SPEC 10.1).
type Responses struct {
	StoreTTL time.Duration `koanf:"store_ttl"` // how long a stored response is kept (Redis or local); default 24h
	MaxLocal int           `koanf:"max_local"` // responses the local store keeps, oldest evicted; default 10000
	// MaxLocalBytes bounds the local store in bytes (its records' items,
	// response objects and a fixed cost each), oldest evicted; default 256 MiB.
	MaxLocalBytes int64 `koanf:"max_local_bytes"`
	// MaxTeamBytes bounds one team's stored responses in Redis, in bytes,
	// the team's oldest evicted first; default 256 MiB.
	MaxTeamBytes int64 `koanf:"max_team_bytes"`
}
