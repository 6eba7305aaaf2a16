// Package gateway owns the HTTP edge (SPEC 2, 3, 11, 12, 14): the gin
// routes, authentication, the request pipeline as small stages over one
// call value, the attempt loop that drives routing's plan through the
// provider adapters, the streaming relay, the decision headers, the error
// format and the admin API. Decisions live in routing; the edge state
// (limits, pins, post-response writes) behind edge.State; gateway wires
// them together and does the HTTP I/O. It does not import go-redis: a node
// with Redis is assembled by package node.
package gateway

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"switchyard/cache"
	"switchyard/catalog"
	"switchyard/config"
	"switchyard/edge"
	"switchyard/providers"
	"switchyard/responses"
	"switchyard/routing"
	"switchyard/routing/tier"
	"switchyard/telemetry"
	"switchyard/tracing"
	"switchyard/wire"
)

// Deps is everything a Server is built from. Nil optional fields get
// node-local defaults in New.
type Deps struct {
	Config   *config.Config
	Catalog  *catalog.Holder
	Router   *routing.Router
	Adapters map[string]providers.Adapter // by provider name
	Edge     edge.State                   // admission, pins, reconcile, audit writes (SPEC 9)
	Tier     *tier.Classifier
	Audit    telemetry.AuditLog // audit reads (GET /admin/requests/{id})
	Metrics  *telemetry.Metrics
	Registry *prometheus.Registry
	Logger   *slog.Logger
	// RequestLog writes each request's log line (SPEC 12.2); nil: one
	// through Logger.
	RequestLog *telemetry.RequestLog
	Tracer     *tracing.Tracer // nil: tracing off (SPEC 12.5)
	Admin      *Admin          // nil: no admin write API (read endpoints still serve when a key is set)
	// Version is the build's version, shown for this node in /admin/cluster.
	Version string
	// RedisState reports "up", "down" or "disabled" for /readyz and /admin/cluster.
	RedisState func() string
	// Cluster lists the nodes seen recently (GET /admin/cluster); nil = this node only.
	Cluster func(ctx context.Context) (any, error)
	// ClusterHealth lists the health snapshots the live nodes published with
	// their heartbeats (GET /admin/health?node=all); nil = this node only.
	ClusterHealth func(ctx context.Context) ([]NodeHealth, error)
	// Live is what a reload replaces (config, router, adapters, classifier);
	// nil: New publishes Config, Router, Adapters and Tier as the only set.
	// The request path reads these through it, never the fields above.
	Live *Live
	// Reloader serves POST /admin/reload; nil: the endpoint answers 409.
	Reloader *Reloader
	// Responses is the Responses API response store; nil: a local one.
	Responses responses.Store
}

// Server is the HTTP edge. Its fields are immutable after New except the
// atomic counters; the live catalog is read through Deps.Catalog.
type Server struct {
	Deps
	engine   *gin.Engine
	adminKey [32]byte
	adminOn  bool
	idPrefix string

	adminGroup *gin.RouterGroup // Assemble registers the write API on it

	// Atomic, shared by every request; they survive reloads.
	idSeq     atomic.Uint64
	bodies    bodyBudget   // request-body bytes held node-wide (SPEC 14)
	bodyLogAt atomic.Int64 // unix ns of the last body-budget warning (one per bodyLogEvery)

	// The response cache (SPEC 18): which requests are cacheable, and the
	// node's bounded store. Built from the config at start.
	cachePolicy *cache.Policy
	cacheLocal  *cache.Local
	cacheGroup  *cache.Group // identical requests in flight on this node
	cachePurges cache.Purges // the purges this node knows of (cache_admin.go)
	cacheStats  cacheStats   // this node's counts per team and model
	// cacheShared is the cluster-wide administration; nil on a node
	// without Redis. Set by SetCacheShared before serving.
	cacheShared CacheShared

	usageReads *usageReads // GET /admin/usage's reads, shared by the same asks (usagecache.go)
}

// New builds the server and its routes.
func New(d Deps) *Server {
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	if d.RequestLog == nil {
		d.RequestLog = telemetry.NewRequestLog(d.Logger, nil)
	}
	if d.Responses == nil {
		d.Responses = responses.NewLocal(time.Now, ResponsesConfig(d.Config))
	}
	if d.RedisState == nil {
		d.RedisState = func() string { return "disabled" }
	}
	var policy *cache.Policy
	var local *cache.Local
	var group *cache.Group
	if d.Config != nil {
		policy, local = cache.NewPolicy(d.Config), cache.NewLocal(d.Config.Cache.MaxLocalBytes)
		group = cache.NewGroup(64, d.Config.Cache.MaxEntryBytes)
	}
	gin.SetMode(gin.ReleaseMode)
	if d.Live == nil {
		d.Live = NewLive(&LiveConfig{Config: d.Config, Router: d.Router, Adapters: d.Adapters, Tier: d.Tier})
	}
	s := &Server{Deps: d, engine: gin.New(), cachePolicy: policy, cacheLocal: local, cacheGroup: group, usageReads: newUsageReads(time.Now)}
	if k := d.Config.Admin.Key; k != "" {
		// clear or sha256:<hex>, like team keys (SPEC 15); validated at load
		if digest, err := config.KeyDigest(k); err == nil {
			s.adminKey, s.adminOn = digest, true
		} else {
			d.Logger.Error("admin API off: admin.key is not a key or a sha256:<64 hex> digest")
		}
	}
	s.idPrefix = d.Config.Server.NodeID
	if s.idPrefix == "" {
		s.idPrefix = "sy"
	}
	s.idPrefix += "-" + strconv.FormatInt(time.Now().UnixNano()%1e9, 36) + "-"
	s.engine.Use(gin.CustomRecovery(func(c *gin.Context, err any) {
		d.Logger.Error("panic in handler", "error", err, "path", c.Request.URL.Path)
		writeError(c, errInternal)
		c.Abort()
	}), s.deadlines)
	s.routes()
	if d.Registry != nil {
		d.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "switchyard", Name: "body_bytes_in_flight",
			Help: "Request-body bytes this node holds now (read or being read), against server.max_inflight_body_bytes."},
			func() float64 { return float64(s.bodies.held.Load()) }))
		if s.cacheLocal != nil {
			d.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "switchyard", Name: "cache_bytes",
				Help: "Bytes of response-cache entries in this node's store (SPEC 18), against cache.max_local_bytes."},
				func() float64 { return float64(s.cacheLocal.Stats().Bytes) }))
		}
	}
	return s
}

// Handler returns the HTTP handler.
func (s *Server) Handler() http.Handler { return s.engine }

func (s *Server) routes() {
	e := s.engine
	e.POST("/v1/chat/completions", s.handleChat)
	e.POST("/v1/embeddings", s.handleEmbeddings)
	e.POST("/v1/images/generations", s.handleImages)
	e.POST("/v1/messages", s.handleMessages)
	e.POST("/v1/messages/count_tokens", s.handleCountTokens)
	e.POST("/v1/responses", s.handleResponses)
	e.GET("/v1/responses/:id", s.handleGetResponse)
	e.GET("/v1/responses/:id/input_items", s.handleInputItems)
	e.DELETE("/v1/responses/:id", s.handleDeleteResponse)
	e.GET("/v1/models", s.handleModels)
	e.GET("/v1/models/*id", s.handleModel)
	e.GET("/healthz", func(c *gin.Context) { c.JSON(http.StatusOK, gin.H{"status": "ok"}) })
	e.GET("/readyz", s.handleReady)
	if s.Config.Server.MetricsListen == "" {
		e.GET("/metrics", gin.WrapH(s.MetricsHandler()))
	}
	e.NoRoute(func(c *gin.Context) {
		id := s.newRequestID(c.Request) // every response carries it (SPEC 10)
		c.Header("X-Request-Id", id)
		c.Header("Request-Id", id)
		// an Anthropic client gets its own error shape on every path it
		// calls, /v1/messages/batches or a wrong method included (SPEC 14)
		format := wire.FormatOpenAI
		if p := c.Request.URL.Path; p == "/v1/messages" || strings.HasPrefix(p, "/v1/messages/") {
			format = wire.FormatAnthropic
		}
		writeErrorFormat(c, &apiError{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "unknown_url",
			Message: "unknown path " + c.Request.Method + " " + c.Request.URL.Path}, format)
	})
	admin := e.Group("/admin", s.adminAuth)
	s.adminGroup = admin
	admin.GET("/health", s.handleAdminHealth)
	admin.GET("/requests/:id", s.handleAdminRequest)
	admin.GET("/cluster", s.handleAdminCluster)
	admin.DELETE("/cache", s.handleCachePurge)
	admin.GET("/cache/stats", s.handleCacheStats)
	admin.GET("/smart-routing", s.handleAdminSmartRouting)
	s.registerConsole()
	admin.POST("/reload", s.handleReload)
	admin.GET("/requests", s.handleRequests)
	admin.GET("/teams/:name/usage", s.handleTeamUsage)
	admin.GET("/teams/:name/keys/:id/usage", s.handleKeyUsage)
	admin.GET("/teams/:name/users/*user", s.handleUser)
	admin.GET("/usage", s.handleUsage)
}

func (s *Server) handleReady(c *gin.Context) {
	snap := s.Catalog.Load()
	c.JSON(http.StatusOK, gin.H{"status": "ready", "catalog_version": snap.Version, "redis": s.RedisState()})
}

// adminAuth checks the admin key in constant time; without a configured
// key the admin API is off (404), never open (SPEC 15).
func (s *Server) adminAuth(c *gin.Context) {
	if !s.adminOn {
		writeError(c, &apiError{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "admin_disabled",
			Message: "the admin API is off: set admin.key (SWITCHYARD_ADMIN_KEY) to enable it"})
		c.Abort()
		return
	}
	key := bearer(c.Request)
	h := sha256.Sum256([]byte(key))
	if key == "" || subtle.ConstantTimeCompare(h[:], s.adminKey[:]) != 1 {
		writeError(c, &apiError{Status: http.StatusUnauthorized, Type: "invalid_request_error", Code: "invalid_admin_key",
			Message: "admin API needs \"Authorization: Bearer <admin key>\""})
		c.Abort()
		return
	}
	c.Next()
}

func bearer(r *http.Request) string {
	const p = "Bearer "
	// the scheme in any case (RFC 9110 11.1): BEARER too
	if a := r.Header.Get("Authorization"); len(a) > len(p) && strings.EqualFold(a[:len(p)], p) {
		return a[len(p):]
	}
	return ""
}

// apiKey reads a team key from Authorization: Bearer or x-api-key.
func apiKey(r *http.Request) string {
	if k := bearer(r); k != "" {
		return k
	}
	return r.Header.Get("X-Api-Key")
}

func (s *Server) handleModels(c *gin.Context) {
	// teamOf also gives the answer its X-Request-Id and request-id, as
	// every response carries (SPEC 10, 12.2)
	team, key := s.teamOf(c, wire.FormatOpenAI)
	if team == nil {
		return
	}
	snap := s.Catalog.Load()
	type entry struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	out := []entry{}
	for name, m := range snap.Models {
		if team.Allows(name) && key.Allows(name) && hasEnabled(m) {
			out = append(out, entry{ID: name, Object: "model", OwnedBy: "switchyard"})
		}
	}
	for alias := range snap.Routes {
		if team.Allows(alias) && key.Allows(alias) {
			out = append(out, entry{ID: alias, Object: "model", OwnedBy: "switchyard-tier-route"})
		}
	}
	slices.SortFunc(out, func(a, b entry) int { return strings.Compare(a.ID, b.ID) })
	c.JSON(http.StatusOK, gin.H{"object": "list", "data": out})
}

func hasEnabled(m *catalog.Model) bool {
	for _, d := range m.Pool {
		if d.On {
			return true
		}
	}
	return false
}

func errNoKeyOr(r *http.Request) *apiError {
	if apiKey(r) == "" {
		return errNoKey
	}
	return errBadKey
}

func (s *Server) newRequestID(r *http.Request) string {
	if id := r.Header.Get("X-Request-Id"); id != "" && len(id) <= 128 && printable(id) {
		return id
	}
	return s.idPrefix + strconv.FormatUint(s.idSeq.Add(1), 36)
}

func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// MetricsHandler serves the Prometheus metrics of this node: the
// registry's and the per-team tables' (telemetry.Handler).
func (s *Server) MetricsHandler() http.Handler {
	var tables []*telemetry.CounterTable
	if s.Metrics != nil {
		tables = s.Metrics.Tables()
	}
	return telemetry.Handler(s.Registry, tables, func(err error) {
		s.Logger.Warn("gathering metrics: some were not served", "error", err)
	})
}

// MetricsServer is the http.Server of server.metrics_listen, serving only
// GET /metrics; nil when metrics are served on the main listener.
func (s *Server) MetricsServer() *http.Server {
	c := s.Config.Server
	if c.MetricsListen == "" {
		return nil
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", s.MetricsHandler())
	return &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: c.ReadHeaderTimeout,
		ReadTimeout:       c.ReadHeaderTimeout + c.ReadTimeout,
		WriteTimeout:      c.WriteTimeout,
		IdleTimeout:       c.IdleTimeout,
		ErrorLog:          slog.NewLogLogger(s.Logger.Handler(), slog.LevelWarn),
	}
}

// HTTPServer is the http.Server for this edge with the SPEC 14 timeouts:
// headers within read_header_timeout, the whole request read within
// read_header_timeout + read_timeout (the body itself gets read_timeout
// from its first read, see readBody), idle keep-alive connections closed
// after idle_timeout. There is no whole-response WriteTimeout: a stream may
// last request_timeout, and each write gets write_timeout to make progress
// instead (renewWriteDeadline).
//
// read_header_timeout and idle_timeout belong to the http.Server and need a
// restart to change; the others are read per request and change on reload.
func (s *Server) HTTPServer() *http.Server {
	c := s.cfg().Server
	return &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: c.ReadHeaderTimeout,
		ReadTimeout:       c.ReadHeaderTimeout + c.ReadTimeout,
		IdleTimeout:       c.IdleTimeout,
		MaxHeaderBytes:    1 << 20,
		ErrorLog:          slog.NewLogLogger(s.Logger.Handler(), slog.LevelWarn),
	}
}
