// Package catalog owns what the gateway routes over (SPEC 1): providers,
// deployments, public models with their strategy, teams with their keys and
// allowlists, tier routes and fallback chains. A Snapshot is built once per
// change and published through a Holder; the request path reads it without
// locks. The admin-managed part (deployments, chains, model strategies,
// teams and their keys) is a State that lives in a Store (SPEC 11): memory, a local file, or Redis shared by all
// replicas. catalog imports config and go-redis (for its shared store),
// never gin.
package catalog

import (
	"math"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"switchyard/config"
)

// Operation is what a request asks for, as a bit so a deployment's set is one word.
type Operation uint8

// The operations of SPEC 1.
const (
	OpChat Operation = 1 << iota
	OpEmbeddings
	OpImages
)

// ParseOperation maps a config name to an Operation (0 when unknown).
func ParseOperation(s string) Operation {
	switch s {
	case "chat":
		return OpChat
	case "embeddings":
		return OpEmbeddings
	case "images":
		return OpImages
	}
	return 0
}

func (o Operation) String() string {
	switch o {
	case OpChat:
		return "chat"
	case OpEmbeddings:
		return "embeddings"
	case OpImages:
		return "images"
	}
	return "unknown"
}

// Provider is an upstream endpoint with its credential. Immutable.
type Provider struct {
	config.Provider
}

// Deployment is one concrete upstream model. Immutable once in a Snapshot;
// its live state (in-flight, latency, cooldown) is kept by routing, keyed by ID.
type Deployment struct {
	config.Deployment
	Ops      Operation // operations served
	Provider *Provider
	Tools    bool // supports tools
	On       bool // enabled
}

// Serves reports whether the deployment lists op.
func (d *Deployment) Serves(op Operation) bool { return d.Ops&op != 0 }

// ExpectedCost is the price in USD of a request with these token counts.
func (d *Deployment) ExpectedCost(inTokens, outTokens int) float64 {
	return (float64(inTokens)*d.Price.Input + float64(outTokens)*d.Price.Output) / 1e6
}

// Cost is the price in USD of an answer's usage (SPEC 10.2). prompt is
// every input token, as OpenAI counts prompt_tokens: cached and cacheWrite
// are the parts of it read from and written to the provider's prompt cache,
// priced at cached_input and cache_write; the rest is priced at input.
// output counts reasoning tokens too. A negative count is 0; parts larger
// than the whole are an upstream's bogus detail and earn no discount: every
// input token is then priced at input.
//
// The counts are plain ints: catalog sits below providers, which owns the
// Usage type and normalizes each provider's convention into these four.
func (d *Deployment) Cost(prompt, cached, cacheWrite, output int) float64 {
	prompt, output = max(prompt, 0), max(output, 0)
	cached, cacheWrite = max(cached, 0), max(cacheWrite, 0)
	if cached+cacheWrite > prompt {
		cached, cacheWrite = 0, 0
	}
	uncached := prompt - cached - cacheWrite
	p := &d.Price
	return (float64(uncached)*p.Input + float64(cached)*p.CachedInputUSD() +
		float64(cacheWrite)*p.CacheWriteUSD() + float64(output)*p.Output) / 1e6
}

// HasPrice reports whether the operator configured a price.
func (d *Deployment) HasPrice() bool { return d.Price.Input > 0 || d.Price.Output > 0 }

// Model is a public model: a name, its strategy and its pool.
type Model struct {
	Name      string
	Strategy  string
	Objective string
	// Pool is every deployment serving the name, enabled or not, in id order.
	Pool []*Deployment
	Ops  Operation // union of the pool's operations (enabled or not)
}

// Team is a group of keys with limits and an allowlist. Its embedded
// config.Team carries no keys: those live in the snapshot's digest index.
type Team struct {
	config.Team
	// allow is the team's allowlist, shared by every team of the snapshot
	// that lists the same models (with 10,000 teams of ["*"] a map each
	// was 2.5 MB). Immutable.
	allow *allowlist
	// Caches hold what other packages keep per team, found once per
	// catalog version and then read from the team the request
	// authenticated as: with 10,000 teams a lookup in a table of all teams
	// is a cache miss on every request. Empty in a new snapshot.
	Caches TeamCaches

	// users are end users with limits of their own, over UserLimits.
	users map[string]*config.Limits
}

// UserLevel is the limits of the team's end user user (SPEC 3.1): their
// own, else the team's user_limits; nil when neither sets a limit.
func (t *Team) UserLevel(user string) *config.Limits {
	if l, ok := t.users[user]; ok {
		if l.Any() {
			return l
		}
		return nil
	}
	if t.Team.UserLimits.Any() {
		return &t.Team.UserLimits
	}
	return nil
}

// UserOverride reports whether user has limits of their own.
func (t *Team) UserOverride(user string) bool { _, ok := t.users[user]; return ok }

// TeamCaches are other packages' per-team values, each field one
// package's to store and load.
type TeamCaches struct {
	Edge   atomic.Value // package edge: its record of the team
	Series atomic.Value // package gateway: the team's row of the requests counter table
	Tokens atomic.Value // package gateway: the team's row of the tokens counter table
}

// Allows reports whether the team may call the public model or alias.
func (t *Team) Allows(model string) bool { return t.allow != nil && t.allow.allows(model) }

// TierRoute is a smart-routing alias.
type TierRoute = config.TierRoute

// Reason is a fallback reason (SPEC 7.3).
type Reason string

// The reasons of SPEC 7.3.
const (
	ReasonGeneral       Reason = "general"
	ReasonContextWindow Reason = "context_window"
	ReasonContentPolicy Reason = "content_policy"
)

// ChainKey names one fallback chain.
type ChainKey struct {
	Primary string
	Reason  Reason
}

// Snapshot is an immutable, fully resolved catalog.
type Snapshot struct {
	Version     int64
	Providers   map[string]*Provider
	Deployments map[string]*Deployment
	Models      map[string]*Model
	Teams       []*Team
	Routes      map[string]*TierRoute
	Chains      map[ChainKey][]string
	Global      []string // routing.fallback_models
	State       *State   // the admin-managed part it was built from

	keys map[[32]byte]*KeyInfo
	// byName is Teams sorted by name, for Team: the same slice when the
	// state lists its teams sorted, as a normalized one does (a map of
	// 10,000 teams was 0.85 MB, for lookups off the request path).
	byName []*Team
}

// Authenticate resolves a presented key to its team at the current time,
// or nil (unknown, or expired).
func (s *Snapshot) Authenticate(key string) *Team { return s.AuthenticateAt(key, time.Now()) }

// AuthenticateAt resolves a presented key to its team, or nil when the key
// is unknown or expired at now. The lookup is by SHA-256 digest, so what
// its timing could tell is how much of a digest matched, never of the key
// itself. It reads only the snapshot: no store call.
func (s *Snapshot) AuthenticateAt(key string, now time.Time) *Team {
	t, _ := s.AuthenticateKey(key, now)
	return t
}

// AuthenticateKey is AuthenticateAt that also returns the key's record.
func (s *Snapshot) AuthenticateKey(key string, now time.Time) (*Team, *KeyInfo) {
	if key == "" {
		return nil, nil
	}
	k := s.keys[HashKey(key)]
	if k == nil || (k.expires != 0 && now.UnixNano() >= k.expires) {
		return nil, nil
	}
	return k.team, k
}

// KeyInfo is what a request learns of the key it authenticated with. A
// snapshot holds one per key (100,000 keys are 100,000 of them, SPEC 16),
// so it is kept small: its limits are shared by every key that sets the
// same ones, and the records of one snapshot are one allocation.
type KeyInfo struct {
	ID, Name string
	// Models narrows the team's allowlist (SPEC 3.1); nil allows what the
	// team allows.
	Models map[string]bool
	limits *config.Limits // the key level's (SPEC 3.1); nil: no key level; shared, never written
	team   *Team
	// unix ns; 0 = never
	expires int64
}

// Level is the key's limits, nil when it sets none. The caller must not
// change them: keys with equal limits share them.
func (k *KeyInfo) Level() *config.Limits {
	if k == nil {
		return nil
	}
	return k.limits
}

// Allows reports whether the key may call the public model or alias (its
// team's allowlist is checked apart).
func (k *KeyInfo) Allows(model string) bool { return k == nil || k.Models == nil || k.Models[model] }

// Team returns the named team, or nil (of two of one name, the later).
func (s *Snapshot) Team(name string) *Team {
	i := sort.Search(len(s.byName), func(i int) bool { return s.byName[i].Name > name })
	if i > 0 && s.byName[i-1].Name == name {
		return s.byName[i-1]
	}
	return nil
}

func byTeamName(a, b *Team) int { return strings.Compare(a.Name, b.Name) }

// Model returns the public model, or nil.
func (s *Snapshot) Model(name string) *Model { return s.Models[name] }

// Chain returns the exact (primary, reason) chain; there is no stand-in.
func (s *Snapshot) Chain(primary string, reason Reason) []string {
	return s.Chains[ChainKey{primary, reason}]
}

// Holder publishes the current Snapshot.
type Holder struct{ p atomic.Pointer[Snapshot] }

// NewHolder returns a holder publishing s.
func NewHolder(s *Snapshot) *Holder {
	h := &Holder{}
	h.p.Store(s)
	return h
}

// Load returns the current snapshot; callers keep using it for a whole request.
func (h *Holder) Load() *Snapshot { return h.p.Load() }

// Store publishes s unless the snapshot served is of a newer catalog
// version (SPEC 9: a replica never replaces its catalog with an older one;
// a watcher's reload can race an admin publish). The same version is taken:
// a rebuild from the same state (a config reload) is not a step back. It
// reports whether s was published.
func (h *Holder) Store(s *Snapshot) bool {
	for {
		cur := h.p.Load()
		if cur != nil && s.Version < cur.Version {
			return false
		}
		if h.p.CompareAndSwap(cur, s) {
			return true
		}
	}
}

// Build resolves a snapshot from the configuration file's live part
// (providers, routes, default strategy, global fallbacks) and the
// admin-managed State (deployments, chains, model strategies, teams, keys).
func Build(cfg *config.Config, st *State) *Snapshot {
	s := &Snapshot{
		Version:     st.Version,
		Providers:   map[string]*Provider{},
		Deployments: map[string]*Deployment{},
		Models:      map[string]*Model{},
		Routes:      map[string]*TierRoute{},
		Chains:      map[ChainKey][]string{},
		Global:      cfg.Routing.FallbackModels,
		State:       st,
	}
	for i := range cfg.Providers {
		p := &Provider{cfg.Providers[i]}
		s.Providers[p.Name] = p
	}
	strategy := map[string]config.Model{}
	for _, m := range st.Models {
		strategy[m.Name] = config.Model{Name: m.Name, Strategy: m.Strategy, Objective: m.Objective}
	}
	deps := append([]config.Deployment(nil), st.Deployments...)
	sort.Slice(deps, func(i, j int) bool { return deps[i].ID < deps[j].ID })
	for _, dc := range deps {
		// a stored deployment may name a provider this node's file lacks
		// (removed before a restart, or added on a replica with a newer
		// file): it stays in the state and the pool, but cannot serve
		// here, so it is off like a disabled one (SPEC 11: missing targets
		// are skipped at runtime), never selected with a nil provider
		p := s.Providers[dc.Provider]
		d := &Deployment{Deployment: dc, Provider: p, Tools: dc.ToolsSupported(), On: dc.IsEnabled() && p != nil}
		for _, op := range dc.Operations {
			d.Ops |= ParseOperation(op)
		}
		s.Deployments[d.ID] = d
		m := s.Models[d.Model]
		if m == nil {
			mc, ok := strategy[d.Model]
			if !ok {
				mc = config.Model{Name: d.Model, Strategy: cfg.Routing.DefaultStrategy, Objective: "balanced"}
			}
			m = &Model{Name: d.Model, Strategy: mc.Strategy, Objective: mc.Objective}
			s.Models[d.Model] = m
		}
		m.Pool = append(m.Pool, d)
		m.Ops |= d.Ops
	}
	nkeys := 0
	for _, ts := range st.Teams {
		nkeys += len(ts.Keys)
	}
	s.keys = make(map[[32]byte]*KeyInfo, nkeys)
	s.Teams = make([]*Team, 0, len(st.Teams))
	infos := make([]KeyInfo, 0, nkeys)   // one allocation; sized, so never moved
	teams := make([]Team, len(st.Teams)) // likewise: one object for the collector, not one a team
	interned, allowlists := limitsPool{}, allowlistPool{}
	for i, ts := range st.Teams {
		t := &teams[i]
		t.Team = config.Team{Name: ts.Name, Models: ts.Models, RPM: ts.RPM, TPM: ts.TPM, MaxParallel: ts.MaxParallel,
			Budget: config.Budget(ts.Budget), RequireUser: ts.RequireUser,
			UserLimits: ts.UserLimits.Level(), Cache: ts.Cache.Config()}
		t.allow = allowlists.of(ts.Models)
		if len(ts.Users) > 0 {
			t.users = make(map[string]*config.Limits, len(ts.Users))
			for u, us := range ts.Users {
				l := us.Over(t.Team.UserLimits)
				t.users[u] = &l
			}
		}
		for _, k := range ts.Keys {
			d := [32]byte(k.Digest)
			infos = append(infos, KeyInfo{ID: k.ID, Name: k.Name, limits: interned.of(k.LimitsSpec.Level()), team: t})
			ki := &infos[len(infos)-1]
			// "*" (taken for a team that allows every model) narrows
			// nothing: the key calls what its team may
			if len(k.Models) > 0 && !slices.Contains(k.Models, "*") {
				ki.Models = make(map[string]bool, len(k.Models))
				for _, m := range k.Models {
					ki.Models[m] = true
				}
			}
			if k.ExpiresAt != nil {
				ki.expires = expiryNanos(*k.ExpiresAt)
			}
			s.keys[d] = ki
		}
		s.Teams = append(s.Teams, t)
	}
	s.byName = s.Teams
	if !slices.IsSortedFunc(s.Teams, byTeamName) {
		s.byName = slices.Clone(s.Teams)
		slices.SortStableFunc(s.byName, byTeamName)
	}
	for i := range cfg.SmartRouting.Routes {
		r := cfg.SmartRouting.Routes[i]
		s.Routes[r.Alias] = &r
	}
	for _, c := range st.Fallbacks {
		s.Chains[ChainKey{c.PrimaryModel, Reason(c.Reason)}] = c.FallbackModels
	}
	return s
}

// CostBound is the highest cost a request for model (a public model or a
// tier alias) of in prompt and out output tokens can reach (SPEC 3.1): at
// the highest input and the highest output price among the deployments it
// may be routed to, both tiers of an alias, their general fallback chains
// and routing.fallback_models. A budget reserves it at admission. An input
// token may turn out to be a cache write, priced at cache_write (Anthropic's
// is above input), so the highest input price counts that one too.
func (s *Snapshot) CostBound(model string, in, out int) float64 {
	var pin, pout float64
	pool := func(name string) {
		if m := s.Models[name]; m != nil {
			for _, d := range m.Pool {
				pin = max(pin, d.Price.Input, d.Price.CachedInputUSD(), d.Price.CacheWriteUSD())
				pout = max(pout, d.Price.Output)
			}
		}
	}
	primary := func(name string) {
		pool(name)
		for _, f := range s.Chains[ChainKey{name, ReasonGeneral}] {
			pool(f)
		}
	}
	if r := s.Routes[model]; r != nil {
		primary(r.Easy)
		primary(r.Hard)
	} else {
		primary(model)
	}
	for _, f := range s.Global {
		pool(f)
	}
	return (float64(in)*pin + float64(out)*pout) / 1e6
}

// The instants whose Unix nanoseconds an int64 holds (1677 to 2262).
var (
	firstNano = time.Unix(0, math.MinInt64)
	lastNano  = time.Unix(0, math.MaxInt64)
)

// expiryNanos is a key's expiry as KeyInfo.expires compares it: Unix
// nanoseconds, clamped to what an int64 holds (time.Time.UnixNano wraps
// outside it, which made an expiry in 9999 one in 1816 and one in 1600 one
// in 2184), and never 0, which means no expiry.
func expiryNanos(t time.Time) int64 {
	switch {
	case t.Before(firstNano):
		return math.MinInt64
	case t.After(lastNano):
		return math.MaxInt64
	}
	if n := t.UnixNano(); n != 0 {
		return n
	}
	return -1 // the epoch itself: long past, not "never"
}

// limitsPool shares one copy of each distinct key-level limits within a
// snapshot: keys issued in tiers mostly set the same few.
type limitsPool map[config.Limits]*config.Limits

// of returns the shared copy of l, nil when l sets no limit.
func (p limitsPool) of(l config.Limits) *config.Limits {
	if !l.Any() {
		return nil
	}
	if c, ok := p[l]; ok {
		return c
	}
	c := &l
	p[l] = c
	return c
}

// allowlist is a team's allowlist (SPEC 3.1) as a set; "*" allows all.
type allowlist struct {
	all    bool
	models map[string]bool // nil when all
}

func (a *allowlist) allows(model string) bool { return a.all || a.models[model] }

// allowlistPool shares one allowlist among the teams of a snapshot that
// list the same models (in the same order: a stored state keeps the order
// it was given, and teams set alike are written alike).
type allowlistPool map[string]*allowlist

// of returns the shared allowlist of models.
func (p allowlistPool) of(models []string) *allowlist {
	k := listKey(models)
	if a, ok := p[k]; ok {
		return a
	}
	a := &allowlist{all: slices.Contains(models, "*")}
	if !a.all {
		a.models = make(map[string]bool, len(models))
		for _, m := range models {
			a.models[m] = true
		}
	}
	p[k] = a
	return a
}
