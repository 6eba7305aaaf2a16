package catalog

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	"switchyard/config"
)

// Lifecycle and validation of teams, keys and public models (SPEC 11). Like
// the deployment rules these are pure: current State in, next State (a
// fresh copy) or an *Error out.

// maxNameLen bounds team and key names (they appear in metrics labels and
// in URLs).
const maxNameLen = 64

// validName reports whether a team name is safe in a URL path segment and a
// metric label: letters, digits, '.', '_' and '-', but not "." or "..",
// which clients (a browser, curl) resolve away as dot segments.
func validName(s string) bool {
	if s == "" || len(s) > maxNameLen || s == "." || s == ".." {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// TeamInput is the body of PUT /admin/teams/{name}: the config's team
// fields except keys (SPEC 11). Models is required: ["*"] allows all.
type TeamInput struct {
	Models      []string `json:"models"`
	RPM         int64    `json:"rpm"`
	TPM         int64    `json:"tpm"`
	MaxParallel int64    `json:"max_parallel"`
	Budget      *Budget  `json:"budget"`
	RequireUser bool     `json:"require_user"`
	// UserLimits apply to each end user separately (SPEC 3.1); nil or all
	// zero: no user level beyond the users' own limits.
	UserLimits *LimitsSpec `json:"user_limits"`
	// Cache is the team's response-cache switch (SPEC 18); absent, or
	// {"enabled": null}, inherits cache.enabled.
	Cache *TeamCache `json:"cache"`
}

// PutTeam creates or replaces the team's settings; its keys and its end
// users' own limits (PutUser) stay. aliases
// are the tier aliases an allowlist may name besides public models.
// created reports whether the team is new.
func PutTeam(cur *State, name string, in TeamInput, aliases map[string]bool) (next *State, created bool, err error) {
	// a team the file seeded may bear any name config.ValidTeamName takes;
	// only a new one is held to the API's narrower alphabet
	if cur.team(name) < 0 && !validName(name) {
		return nil, false, errf(http.StatusBadRequest, "name",
			"name: team name %q must be 1 to %d letters, digits, '.', '_' or '-' (not \".\" or \"..\")", name, maxNameLen)
	}
	if in.Models == nil {
		return nil, false, errf(http.StatusUnprocessableEntity, "models", "models: required (the allowlist; [\"*\"] allows every model)")
	}
	models := cur.ModelOps()
	for i, m := range in.Models {
		if m == "*" {
			continue
		}
		if _, ok := models[m]; !ok && !aliases[m] {
			return nil, false, errf(http.StatusUnprocessableEntity, fmt.Sprintf("models[%d]", i),
				"models[%d]: %q is neither a deployment's public model nor a tier alias", i, m)
		}
	}
	for _, f := range []struct {
		name string
		v    int64
	}{{"rpm", in.RPM}, {"tpm", in.TPM}, {"max_parallel", in.MaxParallel}} {
		if err := checkCount(f.name, f.v); err != nil {
			return nil, false, err
		}
	}
	b := Budget{Period: config.DefaultBudgetPeriod}
	if in.Budget != nil {
		if b, err = checkBudget("budget.", *in.Budget); err != nil {
			return nil, false, err
		}
	}
	var userLimits *LimitsSpec
	if in.UserLimits != nil {
		l, err := checkLevel("user_limits.", *in.UserLimits)
		if err != nil {
			return nil, false, err
		}
		if l != (LimitsSpec{}) {
			userLimits = &l
		}
	}
	next = cur.Clone()
	t := TeamSpec{Name: name, Models: dedup(in.Models), RPM: in.RPM, TPM: in.TPM, MaxParallel: in.MaxParallel, Budget: b, RequireUser: in.RequireUser,
		UserLimits: userLimits}
	if in.Cache != nil {
		t.Cache = teamCache(in.Cache.Config())
	}
	if i := next.team(name); i >= 0 {
		t.Keys, t.Users = next.Teams[i].Keys, next.Teams[i].Users
		next.Teams[i] = t
	} else {
		t.Keys = []Key{}
		next.Teams = append(next.Teams, t)
		created = true
	}
	next.normalize()
	return next, created, nil
}

func dedup(in []string) []string {
	out := []string{}
	for _, s := range in {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// DeleteTeam removes a team and with it every key it holds.
func DeleteTeam(cur *State, name string) (*State, error) {
	next := cur.Clone()
	i := next.team(name)
	if i < 0 {
		return nil, errf(http.StatusNotFound, "name", "no team named %q", name)
	}
	next.Teams = slices.Delete(next.Teams, i, i+1)
	return next, nil
}

// Issued is a key just issued: the clear key, shown once, and its record.
type Issued struct {
	Key   string
	Entry Key
}

// IssueKey adds a fresh key to the team (SPEC 11) with the name, expiry,
// models and limits of in (SPEC 3.1). The name is required; the expiry,
// when set, must lie after now; the models must narrow the team's
// allowlist (aliases are the tier aliases it may name). rnd is the
// randomness source (crypto/rand.Reader in production).
func IssueKey(cur *State, team string, in KeyInput, aliases map[string]bool, now time.Time, rnd io.Reader) (*State, Issued, error) {
	i := cur.team(team)
	if i < 0 {
		return nil, Issued{}, errf(http.StatusNotFound, "team", "no team named %q", team)
	}
	name, err := checkKeyName(in.Name)
	if err != nil {
		return nil, Issued{}, err
	}
	expires, err := checkExpiry(in.ExpiresAt, now)
	if err != nil {
		return nil, Issued{}, err
	}
	models, err := checkKeyModels(cur, &cur.Teams[i], in.Models, aliases)
	if err != nil {
		return nil, Issued{}, err
	}
	limits, err := checkLevel("", in.LimitsSpec)
	if err != nil {
		return nil, Issued{}, err
	}
	clear, k, err := NewKey(rnd, name, now, expires)
	if err != nil {
		return nil, Issued{}, err
	}
	k.Models, k.LimitsSpec = models, limits
	next := cur.Clone()
	next.Teams[i].Keys = append(next.Teams[i].Keys, k)
	if p := next.KeyProblems(); len(p) > 0 {
		return nil, Issued{}, errf(http.StatusConflict, "key", "%s", p[0])
	}
	return next, Issued{Key: clear, Entry: k}, nil
}

// RevokeKey removes one of the team's API keys. A key from the config file
// is revoked by changing the file (409).
func RevokeKey(cur *State, team, id string) (*State, error) {
	next := cur.Clone()
	i := next.team(team)
	if i < 0 {
		return nil, errf(http.StatusNotFound, "team", "no team named %q", team)
	}
	keys := next.Teams[i].Keys
	j := slices.IndexFunc(keys, func(k Key) bool { return k.ID == id })
	if j < 0 {
		return nil, errf(http.StatusNotFound, "id", "team %q has no key with id %q", team, id)
	}
	if keys[j].Source == SourceConfig {
		return nil, errf(http.StatusConflict, "id",
			"key %q comes from the config file: remove it from teams[%s].keys in the file and reload", id, team)
	}
	next.Teams[i].Keys = slices.Delete(keys, j, j+1)
	return next, nil
}

// SyncConfigKeys makes the config keys of every team present in both the
// file and the catalog equal to the file's (API keys stay), so that
// removing a key from the file and reloading revokes it. Teams of the file
// that the catalog does not hold (never seeded, or deleted through the API)
// are not recreated: the catalog is the truth once seeded (SPEC 11). A
// config key whose digest another team already holds is skipped and
// reported. changed reports whether next differs from cur.
func SyncConfigKeys(cur *State, cfg *config.Config, now time.Time) (next *State, changed bool, problems []string) {
	if configKeysUnchanged(cur, cfg, now) {
		return cur, false, nil
	}
	// nothing is copied before it is known to change (SPEC 16: node memory
	// with 100,000 config keys)
	index := make(map[string]int, len(cur.Teams))
	for i, t := range cur.Teams {
		index[t.Name] = i
	}
	inFile := make(map[string]bool, len(cfg.Teams))
	for _, ft := range cfg.Teams {
		inFile[ft.Name] = true
	}
	// digest -> team holding it once synced: every API key, and the config
	// keys of the teams the file leaves alone. The config keys of a team
	// the file lists are replaced by the file's, so one the file moves to
	// another team is not held against it (in whatever order the teams
	// come).
	owner := map[Digest]string{}
	for _, t := range cur.Teams {
		for _, k := range t.Keys {
			if k.Source != SourceConfig || !inFile[t.Name] {
				owner[k.Digest] = t.Name
			}
		}
	}
	synced := map[int][]Key{} // team index -> its keys after the sync
	for _, ft := range cfg.Teams {
		i, ok := index[ft.Name]
		if !ok {
			continue
		}
		old := cur.Teams[i].Keys
		was, api := storedConfigKeys(old)
		fresh := configKeys(ft.Keys, now)
		n := 0
		for _, k := range fresh {
			if o, held := owner[k.Digest]; held && o != ft.Name {
				problems = append(problems, fmt.Sprintf("teams[%s].keys: a key is also held by team %q; it was not applied", ft.Name, o))
				continue
			}
			if w, ok := was[k.ID]; ok {
				k.CreatedAt = w.CreatedAt
				if !sameConfigKey(&k, w) {
					changed = true // the file changed the key's name, models, expiry or limits
				}
				delete(was, k.ID)
			} else {
				changed = true
			}
			fresh[n] = k
			n++
			owner[k.Digest] = ft.Name
		}
		if len(was) > 0 { // config keys the file no longer lists
			changed = true
		}
		kept := slices.Clip(fresh[:n]) // the state keeps it: no slack
		if api > 0 {
			kept = make([]Key, 0, api+n)
			for _, k := range old {
				if k.Source != SourceConfig {
					kept = append(kept, k)
				}
			}
			kept = append(kept, fresh[:n]...)
		}
		synced[i] = kept
	}
	if !changed {
		return cur, false, problems
	}
	next = cur.Clone()
	for i, keys := range synced {
		next.Teams[i].Keys = keys
	}
	return next, true, problems
}

// storedConfigKeys indexes a team's stored config keys by id, and counts
// its other (API) keys.
func storedConfigKeys(keys KeyList) (byID map[string]*Key, api int) {
	byID = make(map[string]*Key, len(keys))
	for j := range keys {
		if keys[j].Source == SourceConfig {
			byID[keys[j].ID] = &keys[j]
		} else {
			api++
		}
	}
	return byID, api
}

// configKeysUnchanged reports, building no list of keys, whether the file
// leaves every team's config keys as cur holds them: each key of the file
// is its team's stored key of the same id, unchanged, once, and no stored
// config key is missing from the file. Anything else (a change, a key
// named twice, one another team holds) is for SyncConfigKeys' full pass.
func configKeysUnchanged(cur *State, cfg *config.Config, now time.Time) bool {
	index := make(map[string]int, len(cur.Teams))
	for i, t := range cur.Teams {
		index[t.Name] = i
	}
	for _, ft := range cfg.Teams {
		i, ok := index[ft.Name]
		if !ok {
			continue
		}
		was, _ := storedConfigKeys(cur.Teams[i].Keys)
		for n, ks := range ft.Keys {
			k, ok := configKey(n, ks, now)
			if !ok {
				return false
			}
			w, held := was[k.ID]
			if !held || w.Digest != k.Digest || !sameConfigKey(&k, w) {
				return false
			}
			delete(was, k.ID)
		}
		if len(was) > 0 {
			return false
		}
	}
	return true
}

// KeyProblems checks the key rules over the whole state: every key has a
// digest (a malformed one does not decode: Digest.UnmarshalText) held once
// (so a key names one team), every key id is unique within its team.
func (s *State) KeyProblems() []string {
	var p []string
	owner := map[Digest]string{}
	for _, t := range s.Teams {
		ids := map[string]bool{}
		for _, k := range t.Keys {
			if k.Digest == (Digest{}) {
				p = append(p, fmt.Sprintf("teams[%s].keys[%s]: the key has no digest", t.Name, k.ID))
			}
			if ids[k.ID] {
				p = append(p, fmt.Sprintf("teams[%s].keys[%s]: id used twice", t.Name, k.ID))
			}
			ids[k.ID] = true
			d := k.Digest
			if o, dup := owner[d]; dup {
				if o == t.Name {
					p = append(p, fmt.Sprintf("teams[%s].keys[%s]: the same key is held twice", t.Name, k.ID))
				} else {
					p = append(p, fmt.Sprintf("teams[%s].keys[%s]: the same key is also held by team %q", t.Name, k.ID, o))
				}
			}
			owner[d] = t.Name
		}
	}
	return p
}

// PutModel sets a public model's strategy and objective (SPEC 5, 11). The
// model must have a persisted deployment; objective defaults to balanced.
func PutModel(cur *State, name string, m ModelSpec) (*State, error) {
	if _, ok := cur.ModelOps()[name]; !ok {
		return nil, errf(http.StatusNotFound, "name", "no deployment serves model %q: create one with PUT /admin/deployments/{id} first", name)
	}
	if m.Name != "" && m.Name != name {
		return nil, errf(http.StatusBadRequest, "name", "body name %q differs from the path name %q", m.Name, name)
	}
	if m.Strategy == "" {
		return nil, errf(http.StatusUnprocessableEntity, "strategy", "strategy: required, one of %s", strings.Join(config.Strategies, ", "))
	}
	if !slices.Contains(config.Strategies, m.Strategy) {
		return nil, errf(http.StatusUnprocessableEntity, "strategy", "strategy: %q is not one of %s", m.Strategy, strings.Join(config.Strategies, ", "))
	}
	if m.Objective == "" {
		m.Objective = "balanced"
	}
	if !slices.Contains([]string{"latency", "cost", "balanced"}, m.Objective) {
		return nil, errf(http.StatusUnprocessableEntity, "objective", "objective: %q is not one of latency, cost, balanced", m.Objective)
	}
	m.Name = name
	next := cur.Clone()
	if i := next.model(name); i >= 0 {
		next.Models[i] = m
	} else {
		next.Models = append(next.Models, m)
		next.normalize()
	}
	return next, nil
}

// DeleteModel drops a model's strategy; it goes back to
// routing.default_strategy. 404 when the name is neither configured nor
// served by a deployment.
func DeleteModel(cur *State, name string) (*State, error) {
	next := cur.Clone()
	i := next.model(name)
	if i < 0 {
		if _, ok := next.ModelOps()[name]; ok {
			return next, nil // already on the default strategy
		}
		return nil, errf(http.StatusNotFound, "name", "no model named %q", name)
	}
	next.Models = slices.Delete(next.Models, i, i+1)
	return next, nil
}

// pruneModels drops the strategies of models left without a deployment
// (their last deployment was deleted or renamed), as chains are.
func (s *State) pruneModels() {
	ops := s.ModelOps()
	s.Models = slices.DeleteFunc(s.Models, func(m ModelSpec) bool { _, ok := ops[m.Name]; return !ok })
}

// Dangling lists what names a public model with no deployment: team
// allowlists and tier route targets. Removing such a model is allowed
// (SPEC 11) and the admin API reports the names in its answer; at runtime
// the allowlist entry is inert and the route answers 404 for that tier.
func Dangling(st *State, routes []config.TierRoute) []string {
	ops := st.ModelOps()
	aliases := map[string]bool{}
	for _, r := range routes {
		aliases[r.Alias] = true
	}
	var out []string
	for _, t := range st.Teams {
		for i, m := range t.Models {
			if _, ok := ops[m]; !ok && m != "*" && !aliases[m] {
				out = append(out, fmt.Sprintf("teams[%s].models[%d]: %q has no deployment", t.Name, i, m))
			}
		}
	}
	for _, r := range routes {
		for _, tgt := range []struct{ field, name string }{{"easy", r.Easy}, {"hard", r.Hard}} {
			if _, ok := ops[tgt.name]; !ok {
				out = append(out, fmt.Sprintf("smart_routing.routes[%s].%s: %q has no deployment", r.Alias, tgt.field, tgt.name))
			}
		}
	}
	sort.Strings(out)
	return out
}

// NewlyDangling is Dangling(after) minus Dangling(before): what a change
// just left without a deployment.
func NewlyDangling(before, after *State, routes []config.TierRoute) []string {
	was := map[string]bool{}
	for _, d := range Dangling(before, routes) {
		was[d] = true
	}
	out := []string{}
	for _, d := range Dangling(after, routes) {
		if !was[d] {
			out = append(out, d)
		}
	}
	return out
}

// sameTime reports whether two optional times are the same instant.
func sameTime(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}
