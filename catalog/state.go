package catalog

import (
	"encoding/json"
	"fmt"
	"maps"
	"sort"
	"time"

	"switchyard/config"
)

// Chain is one fallback chain in the admin API's JSON shape (SPEC 11).
type Chain struct {
	PrimaryModel   string   `json:"primaryModel"`
	Reason         string   `json:"reason"`
	FallbackModels []string `json:"fallbackModels"`
}

// ModelSpec is a public model's routing as the admin API sets it (SPEC 11
// PUT /admin/models/{name}); a model without one uses routing.default_strategy.
type ModelSpec struct {
	Name      string `json:"name"`
	Strategy  string `json:"strategy"`
	Objective string `json:"objective"` // adaptive only: latency | cost | balanced
}

// TeamSpec is a team as the catalog stores it: the config's team fields
// with its keys held as digests, never in clear (SPEC 3, 11).
type TeamSpec struct {
	Name        string   `json:"name"`
	Models      []string `json:"models"`       // allowlist; "*" allows all
	RPM         int64    `json:"rpm"`          // requests per minute; 0 = unlimited
	TPM         int64    `json:"tpm"`          // tokens per minute; 0 = unlimited
	MaxParallel int64    `json:"max_parallel"` // requests in flight; 0 = unlimited
	Budget      Budget   `json:"budget"`
	RequireUser bool     `json:"require_user,omitempty"` // a request must name its end user (SPEC 3.1)
	Keys        KeyList  `json:"keys"`
	// UserLimits apply to each end user separately (SPEC 3.1); nil: none.
	UserLimits *LimitsSpec `json:"user_limits,omitempty"`
	// Users are end users with limits of their own: a field an override
	// omits keeps UserLimits' value (PUT /admin/teams/{team}/users/{user}).
	Users map[string]UserSpec `json:"users,omitempty"`
	// Cache is the team's response-cache switch (SPEC 18); nil, or an
	// Enabled left unset, inherits cache.enabled.
	Cache *TeamCache `json:"cache,omitempty"`
}

// TeamCache is a team's response-cache setting as the state and the admin
// API hold it (config.TeamCache).
type TeamCache struct {
	Enabled *bool `json:"enabled,omitempty"`
}

// teamCache is the state's form of a config team's cache setting: nil
// when it sets nothing.
func teamCache(c config.TeamCache) *TeamCache {
	if c.Enabled == nil {
		return nil
	}
	on := *c.Enabled
	return &TeamCache{Enabled: &on}
}

// Config is c as config.TeamCache (nil: nothing set).
func (c *TeamCache) Config() config.TeamCache {
	if c == nil || c.Enabled == nil {
		return config.TeamCache{}
	}
	on := *c.Enabled
	return config.TeamCache{Enabled: &on}
}

// LimitsSpec is one level's limits as the state and the admin API hold
// them (SPEC 3.1); a zero field sets no limit.
type LimitsSpec struct {
	RPM         int64   `json:"rpm,omitempty"`
	TPM         int64   `json:"tpm,omitempty"`
	MaxParallel int64   `json:"max_parallel,omitempty"`
	Budget      *Budget `json:"budget,omitempty"`
}

// Level is l as config.Limits, budget defaults applied.
func (l *LimitsSpec) Level() config.Limits {
	if l == nil {
		return config.Limits{}
	}
	out := config.Limits{RPM: l.RPM, TPM: l.TPM, MaxParallel: l.MaxParallel}
	if l.Budget != nil {
		out.Budget = config.Budget(*l.Budget)
	}
	out.Budget.ApplyDefaults()
	return out
}

// limitsSpec is the stored form of a config level (nil when it sets nothing).
func limitsSpec(l config.Limits) *LimitsSpec {
	if !l.Any() {
		return nil
	}
	s := &LimitsSpec{RPM: l.RPM, TPM: l.TPM, MaxParallel: l.MaxParallel}
	if l.Budget.USD > 0 {
		b := Budget(l.Budget)
		s.Budget = &b
	}
	return s
}

// UserSpec is one end user's own limits: a nil field keeps the team's
// user_limits value (SPEC 3.1).
type UserSpec struct {
	RPM         *int64  `json:"rpm,omitempty"`
	TPM         *int64  `json:"tpm,omitempty"`
	MaxParallel *int64  `json:"max_parallel,omitempty"`
	Budget      *Budget `json:"budget,omitempty"`
}

// Over is the user's limits over the team default def.
func (u UserSpec) Over(def config.Limits) config.Limits {
	if u.RPM != nil {
		def.RPM = *u.RPM
	}
	if u.TPM != nil {
		def.TPM = *u.TPM
	}
	if u.MaxParallel != nil {
		def.MaxParallel = *u.MaxParallel
	}
	if u.Budget != nil {
		def.Budget = config.Budget(*u.Budget)
		def.Budget.ApplyDefaults()
	}
	return def
}

// Budget is a spend limit per period; its period is, as in the YAML, a
// string in JSON: daily, weekly, monthly or a Go duration ("720h"; a state
// written before calendar periods holds that form).
//
// Its fields are config.Budget's, so each converts to the other.
type Budget struct {
	USD     float64       `json:"usd"`                // 0 = no budget
	Period  config.Period `json:"period"`             // default 720h
	AlertAt float64       `json:"alert_at,omitempty"` // default 0.8
}

// Duration is a time.Duration that reads and writes Go syntax in JSON.
type Duration time.Duration

// MarshalJSON implements json.Marshaler.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON implements json.Unmarshaler: a Go duration string ("720h").
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a duration is a string in Go syntax such as \"720h\"")
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("%q is not a duration in Go syntax such as \"720h\"", s)
	}
	*d = Duration(v)
	return nil
}

// Key is one API key of a team. Only its SHA-256 digest is kept; Prefix is
// enough of it for an operator to recognise it (SPEC 11).
type Key struct {
	ID        string     `json:"id"`
	Name      string     `json:"name"`
	Digest    Digest     `json:"sha256"` // the key's SHA-256, as lower-case hex
	Prefix    string     `json:"prefix"`
	CreatedAt time.Time  `json:"created_at"`
	ExpiresAt *time.Time `json:"expires_at"`
	Models    []string   `json:"models,omitempty"` // narrows the team's allowlist (SPEC 3.1); empty = the team's
	Source    string     `json:"source"`           // SourceAPI or SourceConfig
	// The key level's limits (SPEC 3.1), flat in the key object.
	LimitsSpec
}

// Where a key came from: issued through the admin API, or the config file
// (revoked only by changing the file).
const (
	SourceAPI    = "api"
	SourceConfig = "config"
)

// schemaVersion is the current layout of State. Version 1 held deployments
// and chains only; a stored state of that layout gets its teams and models
// from the config file once (MigrateState). Version 2 held teams without
// their cache switch, which the file's teams[].cache then set at every
// start; a stored state of that layout takes it from the file once.
const schemaVersion = 3

// State is the admin-managed part of the catalog: what a Store persists.
// The config file seeds it once; afterwards the store is the truth.
type State struct {
	Version     int64               `json:"version"`
	Schema      int                 `json:"schema"`
	Deployments []config.Deployment `json:"deployments"`
	Fallbacks   []Chain             `json:"fallbacks"`
	Models      []ModelSpec         `json:"models"`
	Teams       []TeamSpec          `json:"teams"`
}

// SeedState builds the first State from the configuration file: its
// deployments, chains, model strategies, and teams with their config keys
// (as digests).
func SeedState(cfg *config.Config) *State {
	st := &State{Version: 1, Schema: schemaVersion, Deployments: append([]config.Deployment(nil), cfg.Deployments...)}
	for _, f := range cfg.Routing.Fallbacks {
		st.Fallbacks = append(st.Fallbacks, Chain{PrimaryModel: f.Primary, Reason: f.Reason, FallbackModels: append([]string(nil), f.Models...)})
	}
	seedTeamsAndModels(st, cfg, time.Now().UTC().Truncate(time.Second))
	st.normalize()
	st.pack()
	return st
}

func seedTeamsAndModels(st *State, cfg *config.Config, now time.Time) {
	st.Models = nil
	for _, m := range cfg.Models {
		st.Models = append(st.Models, ModelSpec{Name: m.Name, Strategy: m.Strategy, Objective: m.Objective})
	}
	st.Teams = make([]TeamSpec, 0, len(cfg.Teams)) // sized: append's growth leaves spare room in a state kept for good
	for _, t := range cfg.Teams {
		st.Teams = append(st.Teams, TeamSpec{
			Name: t.Name, Models: t.Models, RPM: t.RPM, TPM: t.TPM, MaxParallel: t.MaxParallel,
			Budget: Budget(t.Budget), RequireUser: t.RequireUser, Keys: configKeys(t.Keys, now),
			UserLimits: limitsSpec(t.UserLimits), Cache: teamCache(t.Cache),
		})
	}
}

// MigrateState brings a stored state of an older layout up to date: a
// state from before teams and models lived in the catalog takes them from
// the config file, once; one from before teams held their cache switch
// takes each file team's. It reports whether it changed st.
func MigrateState(st *State, cfg *config.Config) bool {
	if st.Schema >= schemaVersion {
		return false
	}
	if st.Schema < 2 {
		seedTeamsAndModels(st, cfg, time.Now().UTC().Truncate(time.Second))
	} else {
		byName := make(map[string]*TeamCache, len(cfg.Teams))
		for _, t := range cfg.Teams {
			byName[t.Name] = teamCache(t.Cache)
		}
		takeTeamCaches(st, byName)
	}
	st.Schema = schemaVersion
	st.normalize()
	st.pack()
	return true
}

// MigrateFrom is MigrateState for a running node, whose configuration no
// longer holds the file's teams (the catalog does): a stored state of the
// oldest layout takes its teams and models from served, the state the node
// serves, keys included; one of schema 2 (written by a replica not yet
// upgraded) its teams' cache switches. It reports whether it changed st.
func MigrateFrom(st, served *State) bool {
	if st.Schema >= schemaVersion {
		return false
	}
	if st.Schema < 2 {
		c := served.Clone()
		st.Models, st.Teams = c.Models, c.Teams
	} else {
		byName := make(map[string]*TeamCache, len(served.Teams))
		for _, t := range served.Teams {
			byName[t.Name] = t.Cache
		}
		takeTeamCaches(st, byName)
	}
	st.Schema = schemaVersion
	st.normalize()
	return true
}

// takeTeamCaches gives each team of st that has no cache switch the one
// byName holds for its name: a state of schema 2, which held none.
func takeTeamCaches(st *State, byName map[string]*TeamCache) {
	for i := range st.Teams {
		if t := &st.Teams[i]; t.Cache == nil && byName[t.Name] != nil {
			c := *byName[t.Name]
			t.Cache = &c
		}
	}
}

// Clone returns a deep copy that a mutation may change freely, but for a
// team's model list, which teams of the copy may share (pack): it is
// replaced, never written in place.
func (s *State) Clone() *State {
	c := &State{Version: s.Version, Schema: s.Schema, Deployments: make([]config.Deployment, len(s.Deployments)), Fallbacks: make([]Chain, len(s.Fallbacks))}
	copy(c.Deployments, s.Deployments)
	for i, f := range s.Fallbacks {
		c.Fallbacks[i] = Chain{f.PrimaryModel, f.Reason, append([]string(nil), f.FallbackModels...)}
	}
	c.Models = append([]ModelSpec(nil), s.Models...)
	c.Teams = make([]TeamSpec, len(s.Teams))
	for i, t := range s.Teams {
		if t.Users != nil {
			t.Users = maps.Clone(t.Users)
		}
		if t.Cache != nil {
			tc := *t.Cache
			t.Cache = &tc
		}
		c.Teams[i] = t
	}
	c.pack() // its own copies of the keys and model lists
	return c
}

// normalize sorts every list by its key, so equal states serialize equally,
// and turns absent lists into empty ones (the admin API answers [] not null).
func (s *State) normalize() {
	sort.Slice(s.Deployments, func(i, j int) bool { return s.Deployments[i].ID < s.Deployments[j].ID })
	sort.Slice(s.Fallbacks, func(i, j int) bool {
		a, b := s.Fallbacks[i], s.Fallbacks[j]
		if a.PrimaryModel != b.PrimaryModel {
			return a.PrimaryModel < b.PrimaryModel
		}
		return a.Reason < b.Reason
	})
	sort.Slice(s.Models, func(i, j int) bool { return s.Models[i].Name < s.Models[j].Name })
	sort.Slice(s.Teams, func(i, j int) bool { return s.Teams[i].Name < s.Teams[j].Name })
	if s.Deployments == nil {
		s.Deployments = []config.Deployment{}
	}
	if s.Fallbacks == nil {
		s.Fallbacks = []Chain{}
	}
	if s.Models == nil {
		s.Models = []ModelSpec{}
	}
	if s.Teams == nil {
		s.Teams = []TeamSpec{}
	}
	for i := range s.Teams {
		if s.Teams[i].Keys == nil {
			s.Teams[i].Keys = []Key{}
		}
		if s.Teams[i].Models == nil {
			s.Teams[i].Models = []string{}
		}
	}
}

// ModelOps maps each public model to the operations of all its persisted
// deployments, disabled ones included (SPEC 11: disabling is temporary).
func (s *State) ModelOps() map[string][]string {
	m := map[string][]string{}
	for _, d := range s.Deployments {
		m[d.Model] = append(m[d.Model], d.Operations...)
	}
	return m
}

// team returns the index of the named team, or -1.
func (s *State) team(name string) int {
	for i := range s.Teams {
		if s.Teams[i].Name == name {
			return i
		}
	}
	return -1
}

// model returns the index of the named model's spec, or -1.
func (s *State) model(name string) int {
	for i := range s.Models {
		if s.Models[i].Name == name {
			return i
		}
	}
	return -1
}
