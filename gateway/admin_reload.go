package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"

	"switchyard/catalog"
	"switchyard/config"
	"switchyard/providers"
	"switchyard/routing"
	"switchyard/routing/tier"
)

// LiveConfig is the part of a node that a config reload replaces, as one
// value (SPEC 11): the configuration, the router (knobs new, deployment
// state carried over), the provider adapters and the tier classifier. A
// request reads it through the Server's accessors; a request already
// running keeps the router plan and adapter it started with.
type LiveConfig struct {
	Config   *config.Config
	Router   *routing.Router
	Adapters map[string]providers.Adapter // by provider name
	Tier     *tier.Classifier

	// teams is the fingerprint of the file's teams (teamsPrint), which a
	// node's running configuration keeps in place of them for a reload's
	// report: the catalog holds what serves, and with 10,000 teams the
	// section cost about 1 ms of every collection's marking.
	teams [32]byte
}

// Live publishes the current LiveConfig.
type Live struct{ p atomic.Pointer[LiveConfig] }

// NewLive returns a Live publishing lc.
func NewLive(lc *LiveConfig) *Live {
	l := &Live{}
	l.p.Store(lc)
	return l
}

// Load returns the current configuration set.
func (l *Live) Load() *LiveConfig { return l.p.Load() }

func (s *Server) cfg() *config.Config                    { return s.Live.Load().Config }
func (s *Server) router() *routing.Router                { return s.Live.Load().Router }
func (s *Server) adapters() map[string]providers.Adapter { return s.Live.Load().Adapters }
func (s *Server) classifier() *tier.Classifier           { return s.Live.Load().Tier }

// Reloader applies a new configuration file to a running node without
// dropping a request (SPEC 11): SIGHUP and POST /admin/reload both land in
// Reload. It also owns publishing catalog snapshots, so a snapshot is always
// built from the newest state and the newest configuration together.
type Reloader struct {
	// Immutable after NewReloader.
	live   *Live
	holder *catalog.Holder
	path   string // the config file; "" for the built-in demo (nothing to re-read)
	load   func(path string) (*config.Config, error)
	log    *slog.Logger
	now    func() time.Time

	mu    sync.Mutex // serializes reloads and snapshot publication
	admin *Admin     // guarded by mu; set once by Assemble: syncs config keys into the store
	// keysFile is the last applied file (its keys included) while its key
	// sync is under way, nil once that sync is done; guarded by mu. A
	// reload's sync reads it when it computes, so the keys stored are
	// those of the file applied last, even when an earlier reload's sync
	// finishes after a later reload's.
	keysFile *config.Config
}

// NewReloader returns the reloader of a node serving the file at path.
func NewReloader(live *Live, holder *catalog.Holder, path string, log *slog.Logger) *Reloader {
	return &Reloader{live: live, holder: holder, path: path, load: config.LoadFile, log: log, now: time.Now}
}

// Publish builds a snapshot of st with the live configuration and makes it
// current on this node (admin writes and change notices call it), unless st
// is older than the state served (versions only move forward). It reports
// whether st was taken.
func (r *Reloader) Publish(st *catalog.State) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.publishLocked(st)
}

func (r *Reloader) publishLocked(st *catalog.State) bool {
	lc := r.live.Load()
	snap := catalog.Build(lc.Config, st)
	if !r.holder.Store(snap) {
		return false
	}
	lc.Router.Sync(snap)
	return true
}

func (r *Reloader) setAdmin(a *Admin) {
	r.mu.Lock()
	r.admin = a
	r.mu.Unlock()
}

// ReloadReport says what a reload did.
type ReloadReport struct {
	File       string   `json:"file"`
	Applied    []string `json:"applied"`            // sections that changed and are live; teams[].keys: config keys synced
	NotApplied []string `json:"not_applied"`        // fields that changed but need a restart
	Warnings   []string `json:"warnings"`           // allowed, but worth knowing
	Problems   []string `json:"problems,omitempty"` // why the file was rejected
	// CatalogManaged are the catalog's sections the file changed, which a
	// reload never applies (SPEC 11: the admin-managed catalog is not
	// overwritten once seeded). They are not in NotApplied: a restart does
	// not apply them either, only the admin API does.
	CatalogManaged []CatalogChange `json:"catalog_managed"`
	Version        int64           `json:"catalog_version"` // the snapshot serving after the reload
}

// CatalogChange is a section of the admin-managed catalog that the file
// changed, with the admin endpoint that changes it.
type CatalogChange struct {
	Field string `json:"field"` // deployments, models, routing.fallbacks or teams
	Hint  string `json:"hint"`  // one line naming the admin endpoint to use
}

// ErrReloadRejected wraps the problems of a file that was not applied.
var ErrReloadRejected = errors.New("configuration rejected")

// ErrNoConfigFile is returned when the node serves the built-in demo.
var ErrNoConfigFile = errors.New("this node serves the built-in demo: there is no config file to reload")

// Reload re-reads the file and applies it; on any problem nothing changes
// and every problem is logged.
func (r *Reloader) Reload(ctx context.Context) (*ReloadReport, error) {
	if r.path == "" {
		return nil, ErrNoConfigFile
	}
	next, err := r.load(r.path)
	if err != nil {
		rep := &ReloadReport{File: r.path, Version: r.holder.Load().Version}
		var p config.Problems
		if errors.As(err, &p) {
			rep.Problems = p
		} else {
			rep.Problems = []string{err.Error()}
		}
		r.logRejected(rep)
		return rep, fmt.Errorf("%w: %d problem(s)", ErrReloadRejected, len(rep.Problems))
	}
	return r.Apply(ctx, next)
}

func (r *Reloader) logRejected(rep *ReloadReport) {
	for _, p := range rep.Problems {
		r.log.Error("config reload rejected: the running configuration keeps serving", "file", rep.File, "problem", p)
	}
}

// Apply makes a validated configuration live: providers (an unchanged
// provider keeps its adapter and its pooled connections), routing knobs
// (deployment scoring state survives), smart routing, server limits read per
// request (body size, timeouts), the default strategy and the global
// fallbacks. The admin-managed catalog is never overwritten; only the config
// keys of teams it holds follow the file (catalog.SyncConfigKeys); the
// catalog's sections the file changed are reported (CatalogManaged). Fields
// that only a restart can change are reported and keep their running value.
func (r *Reloader) Apply(ctx context.Context, next *config.Config) (*ReloadReport, error) {
	r.mu.Lock()
	cur := r.live.Load()
	rep := &ReloadReport{File: r.path, Applied: []string{}, NotApplied: []string{}, Warnings: []string{}, CatalogManaged: []CatalogChange{}}
	merged := *next
	rep.NotApplied = keepRestartOnly(cur.Config, &merged)
	st := r.holder.Load().State
	rep.Problems = reloadProblems(st, &merged)
	adapters := map[string]providers.Adapter{}
	var retired []providers.Adapter
	// the adapters are built even when the catalog check found problems:
	// a rejected file lists every problem at once (SPEC 11), those of
	// providers that cannot be built too
	old := map[string]config.Provider{}
	for _, p := range cur.Config.Providers {
		old[p.Name] = p
	}
	for i := range merged.Providers {
		p := merged.Providers[i]
		if o, ok := old[p.Name]; ok && reflect.DeepEqual(o, p) {
			adapters[p.Name] = cur.Adapters[p.Name]
			continue
		}
		a, err := providers.New(&catalog.Provider{Provider: p})
		if err != nil {
			rep.Problems = append(rep.Problems, fmt.Sprintf("providers[%d]: %v", i, err))
			continue
		}
		adapters[p.Name] = a
	}
	if len(rep.Problems) == 0 {
		for name, a := range cur.Adapters {
			if adapters[name] != a {
				retired = append(retired, a)
			}
		}
	}
	if len(rep.Problems) > 0 {
		// adapters built for the rejected file go too (a vertex adapter
		// runs a token refresh until closed)
		for name, a := range adapters {
			if c, ok := a.(interface{ CloseIdleConnections() }); ok && cur.Adapters[name] != a {
				c.CloseIdleConnections()
			}
		}
		rep.Version = r.holder.Load().Version
		r.mu.Unlock()
		r.logRejected(rep)
		return rep, fmt.Errorf("%w: %d problem(s)", ErrReloadRejected, len(rep.Problems))
	}
	// the running configuration keeps no key specs: the catalog holds every
	// key once synced below (with 100,000 keys a second copy is 16 MB);
	// merged keeps them for the sync and is not published
	pub := merged
	pub.Teams = nil
	lc := &LiveConfig{Config: &pub, Router: cur.Router.Reconfigure(merged.Routing), Adapters: adapters, Tier: tier.New(merged.SmartRouting),
		teams: teamsPrint(merged.Teams)}
	rep.Applied = changedSections(cur, lc)
	rep.CatalogManaged = catalogChanges(cur, lc, &merged)
	r.live.p.Store(lc)
	r.publishLocked(st)
	rep.Warnings = append(rep.Warnings, catalog.Dangling(st, merged.SmartRouting.Routes)...)
	admin := r.admin
	r.keysFile = &merged
	r.mu.Unlock()

	// idle pooled connections of replaced providers go; in-flight calls keep theirs
	for _, a := range retired {
		if c, ok := a.(interface{ CloseIdleConnections() }); ok {
			c.CloseIdleConnections()
		}
	}
	if admin != nil {
		changed, w, err := admin.syncConfigKeysOf(ctx, r.lastKeysFile)
		r.mu.Lock()
		if r.keysFile == &merged {
			r.keysFile = nil // synced: the file's keys are not kept (16 MB with 100,000 keys)
		}
		r.mu.Unlock()
		rep.Warnings = append(rep.Warnings, w...)
		if changed {
			rep.Applied = append(rep.Applied, "teams[].keys") // the config keys of the catalog's teams follow the file
		}
		if err != nil {
			rep.Warnings = append(rep.Warnings, "config keys not synced into the catalog: "+err.Error())
		}
	}
	rep.Version = r.holder.Load().Version
	for _, f := range rep.NotApplied {
		r.log.Warn("config reload: this field changed but needs a restart; the running value stays", "field", f)
	}
	if len(rep.CatalogManaged) > 0 {
		r.log.Warn("config reload: the file changed the admin-managed catalog, which a reload never overwrites; change it through the admin API",
			"catalog_managed", rep.CatalogManaged)
	}
	r.log.Info("config reloaded", "file", r.path, "applied", rep.Applied, "catalog_version", rep.Version, "warnings", len(rep.Warnings))
	return rep, nil
}

// keepRestartOnly copies into next the running values of the fields a
// reload cannot change (listener, node identity, Redis connection, admin
// key, local state directory, audit size) and names those that differed.
func keepRestartOnly(cur, next *config.Config) []string {
	var out []string
	keep := func(name string, differ bool, restore func()) {
		if differ {
			out = append(out, name)
			restore()
		}
	}
	keep("server.listen", cur.Server.Listen != next.Server.Listen, func() { next.Server.Listen = cur.Server.Listen })
	keep("server.node_id", cur.Server.NodeID != next.Server.NodeID, func() { next.Server.NodeID = cur.Server.NodeID })
	keep("server.metrics_listen", cur.Server.MetricsListen != next.Server.MetricsListen, func() { next.Server.MetricsListen = cur.Server.MetricsListen })
	// the http.Server's own timeouts (HTTPServer); read_timeout and
	// write_timeout are applied per request and change live
	keep("server.read_header_timeout", cur.Server.ReadHeaderTimeout != next.Server.ReadHeaderTimeout,
		func() { next.Server.ReadHeaderTimeout = cur.Server.ReadHeaderTimeout })
	keep("server.idle_timeout", cur.Server.IdleTimeout != next.Server.IdleTimeout, func() { next.Server.IdleTimeout = cur.Server.IdleTimeout })
	keep("redis", !reflect.DeepEqual(cur.Redis, next.Redis), func() { next.Redis = cur.Redis })
	keep("admin.key", cur.Admin.Key != next.Admin.Key, func() { next.Admin = cur.Admin })
	keep("data_dir", cur.DataDir != next.DataDir, func() { next.DataDir = cur.DataDir })
	keep("audit", !reflect.DeepEqual(cur.Audit, next.Audit), func() { next.Audit = cur.Audit })
	// the Go runtime's settings (cmd/switchyard, at start), the tracer,
	// the Responses store, and the response cache's policy and local store
	// (NewServer) are built once
	keep("server.memory_limit", cur.Server.MemoryLimitSpec != next.Server.MemoryLimitSpec,
		func() { next.Server.MemoryLimitSpec = cur.Server.MemoryLimitSpec })
	keep("server.procs", cur.Server.Procs != next.Server.Procs, func() { next.Server.Procs = cur.Server.Procs })
	keep("server.gc_percent", cur.Server.GCPercent != next.Server.GCPercent, func() { next.Server.GCPercent = cur.Server.GCPercent })
	keep("tracing", cur.Tracing != next.Tracing, func() { next.Tracing = cur.Tracing })
	keep("responses", cur.Responses != next.Responses, func() { next.Responses = cur.Responses })
	keep("cache.enabled", cur.Cache.Enabled != next.Cache.Enabled, func() { next.Cache.Enabled = cur.Cache.Enabled })
	keep("cache.ttl", cur.Cache.TTL != next.Cache.TTL, func() { next.Cache.TTL = cur.Cache.TTL })
	keep("cache.max_local_bytes", cur.Cache.MaxLocalBytes != next.Cache.MaxLocalBytes,
		func() { next.Cache.MaxLocalBytes = cur.Cache.MaxLocalBytes })
	running, file := modelCaches(cur.Models), modelCaches(next.Models)
	keep("models[].cache", !reflect.DeepEqual(running, file), func() {
		next.Models = slices.Clone(next.Models)
		for i := range next.Models {
			next.Models[i].Cache = running[next.Models[i].Name]
		}
	})
	return out
}

// modelCaches is each model's cache setting, the models that set none
// left out.
func modelCaches(models []config.Model) map[string]config.ModelCache {
	out := map[string]config.ModelCache{}
	for _, m := range models {
		if m.Cache.Enabled != nil || m.Cache.TTL != 0 {
			out[m.Name] = m.Cache
		}
	}
	return out
}

// changedSections names the live sections that differ. routing.fallbacks
// only seeds the catalog's chains (catalogChanges), so it is left out of
// routing; the file's teams are the catalog's too.
func changedSections(cur, next *LiveConfig) []string {
	out := []string{}
	a, b := cur.Config, next.Config
	ra, rb := a.Routing, b.Routing
	ra.Fallbacks, rb.Fallbacks = nil, nil
	for _, s := range []struct {
		name string
		a, b any
	}{
		{"server", a.Server, b.Server}, {"providers", a.Providers, b.Providers},
		{"routing", ra, rb}, {"smart_routing", a.SmartRouting, b.SmartRouting},
	} {
		if !reflect.DeepEqual(s.a, s.b) {
			out = append(out, s.name)
		}
	}
	return out
}

// catalogChanges names the sections of the admin-managed catalog that the
// file next changed since the running one (SPEC 11: a reload applies none
// of them once the catalog is seeded), each with the endpoint that does.
// file is next's configuration with its teams (next.Config keeps none).
// A team's config keys are not among them: they follow the file.
func catalogChanges(cur, next *LiveConfig, file *config.Config) []CatalogChange {
	out := []CatalogChange{}
	a := cur.Config
	for _, s := range []struct {
		field   string
		changed bool
		hint    string
	}{
		{"deployments", !reflect.DeepEqual(a.Deployments, file.Deployments),
			"the catalog keeps its deployments: use PUT or DELETE /admin/deployments/{id}"},
		{"models", !reflect.DeepEqual(a.Models, file.Models),
			"the catalog keeps its models' strategies: use PUT or DELETE /admin/models/{name}"},
		{"routing.fallbacks", !reflect.DeepEqual(a.Routing.Fallbacks, file.Routing.Fallbacks),
			"the catalog keeps its chains: use PUT or DELETE /admin/fallbacks"},
		{"teams", cur.teams != next.teams,
			"the catalog keeps its teams (config keys follow the file): use PUT or DELETE /admin/teams/{name}"},
	} {
		if s.changed {
			out = append(out, CatalogChange{Field: s.field, Hint: s.hint})
		}
	}
	return out
}

// teamsPrint is the fingerprint of a file's teams without their key specs
// (the catalog holds the keys): SHA-256 over each team's JSON.
func teamsPrint(teams []config.Team) [32]byte {
	h := sha256.New()
	enc := json.NewEncoder(h)
	for _, t := range teams {
		t.Keys = nil
		_ = enc.Encode(&t) // a config.Team always encodes: no channels, funcs or cycles
	}
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// reloadProblems checks a new file against the catalog it will serve: every
// stored deployment's provider must still exist (the file validated itself
// already, against its own deployments).
func reloadProblems(st *catalog.State, next *config.Config) []string {
	names := map[string]bool{}
	for _, p := range next.Providers {
		names[p.Name] = true
	}
	var out []string
	for _, d := range st.Deployments {
		if !names[d.Provider] {
			out = append(out, fmt.Sprintf("providers: deployment %q in the catalog uses provider %q, which the new file removes (delete or move the deployment first)", d.ID, d.Provider))
		}
	}
	slices.Sort(out)
	return out
}

// lastKeysFile is the file whose keys a sync stores: the one applied last,
// or nil when a later reload has synced it already.
func (r *Reloader) lastKeysFile() *config.Config {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.keysFile
}

// syncConfigKeys stores the file's config keys for the teams the catalog
// holds (catalog.SyncConfigKeys); no write when nothing changed. cfg is
// not changed: a caller whose cfg is the running configuration publishes
// it without its keys (withoutKeys).
func (a *Admin) syncConfigKeys(ctx context.Context, cfg *config.Config) (changed bool, problems []string, err error) {
	return a.syncConfigKeysOf(ctx, func() *config.Config { return cfg })
}

// syncConfigKeysOf is syncConfigKeys of the file file returns when the
// sync computes (nil: nothing left to sync).
func (a *Admin) syncConfigKeysOf(ctx context.Context, file func() *config.Config) (changed bool, problems []string, err error) {
	// against the catalog this node holds first: a file that changes no
	// key (a start on the catalog it just seeded or loaded, most reloads)
	// costs no read of the stored catalog, which apply makes in full (25 MB
	// decoded for 100,000 keys)
	cfg := file()
	if cfg == nil {
		return false, nil, nil
	}
	if _, ch, p := catalog.SyncConfigKeys(a.holder.Load().State, cfg, a.now()); !ch {
		return false, p, nil
	}
	_, err = a.apply(ctx, func(cur *catalog.State) (*catalog.State, error) {
		cfg := file() // the file applied last: a later reload may have come meanwhile
		if cfg == nil {
			return nil, errUnchanged
		}
		next, ch, p := catalog.SyncConfigKeys(cur, cfg, a.now())
		problems = p
		if !ch {
			return nil, errUnchanged
		}
		changed = true
		return next, nil
	})
	if errors.Is(err, errUnchanged) {
		err = nil
	}
	return changed, problems, err
}

var errUnchanged = errors.New("unchanged")

// handleReload is POST /admin/reload: 200 with the report, 422 with every
// problem when the file was rejected (nothing changed), 409 on the demo.
func (s *Server) handleReload(c *gin.Context) {
	if s.Reloader == nil {
		writeError(c, &apiError{Status: http.StatusConflict, Type: "invalid_request_error", Code: "no_config_file", Message: ErrNoConfigFile.Error()})
		return
	}
	rep, err := s.Reloader.Reload(c.Request.Context())
	switch {
	case errors.Is(err, ErrNoConfigFile):
		writeError(c, &apiError{Status: http.StatusConflict, Type: "invalid_request_error", Code: "no_config_file", Message: err.Error()})
	case errors.Is(err, ErrReloadRejected):
		c.JSON(http.StatusUnprocessableEntity, gin.H{
			"error":  gin.H{"message": "the config file was rejected; the running configuration keeps serving: " + rep.Problems[0], "type": "invalid_request_error", "code": "config_rejected", "param": nil},
			"report": rep,
		})
	case err != nil:
		writeError(c, &apiError{Status: http.StatusInternalServerError, Type: "internal_error", Message: err.Error()})
	default:
		c.JSON(http.StatusOK, rep)
	}
}
