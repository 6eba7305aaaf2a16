package catalog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"switchyard/config"
)

// The key and end-user levels of SPEC 3.1 as the admin API changes them:
// a key's limits and models (PATCH /admin/teams/{team}/keys/{id}) and an
// end user's own limits (PUT|DELETE /admin/teams/{team}/users/{user}).
// Pure, like the rest of the lifecycle: current State in, next State or an
// *Error naming the field out.

// MaxUserLen bounds an end-user id (SPEC 3.1: at most 128 bytes).
const MaxUserLen = 128

// MaxUserOverrides bounds how many end users of one team may have limits
// of their own. The whole catalog state is one document that every replica
// loads on each change, so per-user entries must stay few; a population of
// users is limited through the team's user_limits instead.
const MaxUserOverrides = 10000

// Patch is one member of a JSON merge patch (RFC 7396): absent (Set
// false), null (Set true, Value nil: clear it) or a value.
type Patch[T any] struct {
	Set   bool
	Value *T
}

// UnmarshalJSON implements json.Unmarshaler; it is called only for a
// member the patch carries, null included. Objects are read strictly, like
// every admin body: an unknown member is an error.
func (p *Patch[T]) UnmarshalJSON(b []byte) error {
	p.Set, p.Value = true, nil
	if string(b) == "null" {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	v := new(T)
	if err := dec.Decode(v); err != nil {
		return err
	}
	p.Value = v
	return nil
}

// KeyInput is what an issued key carries besides its secret (SPEC 3.1,
// 11): a name, an optional expiry, the models it narrows its team's
// allowlist to (empty: the team's) and its own limits (zero: none).
type KeyInput struct {
	Name      string
	ExpiresAt *time.Time
	Models    []string
	LimitsSpec
}

// KeyPatch is the body of PATCH /admin/teams/{team}/keys/{id}, with JSON
// merge semantics: an absent member keeps the key's value, null clears it
// (no expiry, the team's allowlist, no limit), and a limit of 0 clears it
// too. budget merges member by member; its usd 0 clears it.
type KeyPatch struct {
	Name        Patch[string]      `json:"name"`
	ExpiresAt   Patch[string]      `json:"expires_at"` // RFC 3339
	Models      Patch[[]string]    `json:"models"`
	RPM         Patch[int64]       `json:"rpm"`
	TPM         Patch[int64]       `json:"tpm"`
	MaxParallel Patch[int64]       `json:"max_parallel"`
	Budget      Patch[BudgetPatch] `json:"budget"`
}

// BudgetPatch is a merge patch of a budget: a null member goes back to its
// default (period 720h, alert_at 0.8).
type BudgetPatch struct {
	USD     Patch[float64]       `json:"usd"`
	Period  Patch[config.Period] `json:"period"`
	AlertAt Patch[float64]       `json:"alert_at"`
}

// over applies p to b (nil: no budget yet).
func (p BudgetPatch) over(b *Budget) Budget {
	var out Budget
	if b != nil {
		out = *b
	}
	if p.USD.Set {
		out.USD = valueOr(p.USD.Value)
	}
	if p.Period.Set {
		out.Period = valueOr(p.Period.Value)
	}
	if p.AlertAt.Set {
		out.AlertAt = valueOr(p.AlertAt.Value)
	}
	return out
}

func valueOr[T any](v *T) T {
	var zero T
	if v == nil {
		return zero
	}
	return *v
}

// checkCount refuses a negative rpm, tpm or max_parallel.
func checkCount(field string, v int64) error {
	if v < 0 {
		return errf(http.StatusUnprocessableEntity, field, "%s: must not be negative (0 = unlimited), got %d", field, v)
	}
	return nil
}

// checkBudget validates a budget whose fields are named under prefix
// ("budget.", "user_limits.budget.") and fills in the default period; a
// zero alert_at stays (it reads as the default 0.8).
func checkBudget(prefix string, b Budget) (Budget, error) {
	if b.USD < 0 {
		return b, errf(http.StatusUnprocessableEntity, prefix+"usd", "%susd: must not be negative (0 = no budget), got %g", prefix, b.USD)
	}
	if b.Period.Calendar == "" && b.Period.Every < 0 {
		return b, errf(http.StatusUnprocessableEntity, prefix+"period", "%speriod: must be daily, weekly, monthly or a positive duration such as \"720h\"", prefix)
	}
	if b.Period.IsZero() {
		b.Period = config.DefaultBudgetPeriod
	}
	if b.AlertAt < 0 || b.AlertAt > 1 {
		return b, errf(http.StatusUnprocessableEntity, prefix+"alert_at", "%salert_at: must be within (0, 1] (a share of %susd), got %g", prefix, prefix, b.AlertAt)
	}
	return b, nil
}

// checkLevel validates one level's limits, fields named under prefix, and
// returns them as stored: a budget of usd 0 is none, defaults filled in.
func checkLevel(prefix string, l LimitsSpec) (LimitsSpec, error) {
	for _, f := range []struct {
		name string
		v    int64
	}{{"rpm", l.RPM}, {"tpm", l.TPM}, {"max_parallel", l.MaxParallel}} {
		if err := checkCount(prefix+f.name, f.v); err != nil {
			return l, err
		}
	}
	if l.Budget != nil {
		b, err := checkBudget(prefix+"budget.", *l.Budget)
		if err != nil {
			return l, err
		}
		l.Budget = nil
		if b.USD > 0 {
			if b.AlertAt == 0 {
				b.AlertAt = config.DefaultAlertAt
			}
			l.Budget = &b
		}
	}
	return l, nil
}

// checkKeyName trims and bounds a key's name.
func checkKeyName(name string) (string, error) {
	name = strings.TrimSpace(name)
	if name == "" || len(name) > maxNameLen {
		return "", errf(http.StatusUnprocessableEntity, "name", "name: required, 1 to %d characters (what the key is for, e.g. \"ci\")", maxNameLen)
	}
	return name, nil
}

// checkExpiry refuses an expiry that is not after now and returns it in UTC.
func checkExpiry(exp *time.Time, now time.Time) (*time.Time, error) {
	if exp == nil {
		return nil, nil
	}
	if !exp.After(now) {
		return nil, errf(http.StatusUnprocessableEntity, "expires_at", "expires_at: %s is not in the future", exp.UTC().Format(time.RFC3339))
	}
	e := exp.UTC()
	return &e, nil
}

// checkKeyModels checks that a key's models narrow its team's allowlist
// (SPEC 3.1): each is on the list, or, for a team that allows every model,
// is "*", a deployment's public model or a tier alias. It returns them
// without repeats; empty is nil (the team's allowlist).
func checkKeyModels(st *State, t *TeamSpec, models []string, aliases map[string]bool) ([]string, error) {
	if len(models) == 0 {
		return nil, nil
	}
	all := slices.Contains(t.Models, "*")
	ops := st.ModelOps()
	for i, m := range models {
		field := fmt.Sprintf("models[%d]", i)
		switch {
		case slices.Contains(t.Models, m):
		case all:
			if _, ok := ops[m]; !ok && !aliases[m] {
				return nil, errf(http.StatusUnprocessableEntity, field, "%s: %q is neither a deployment's public model nor a tier alias", field, m)
			}
		default:
			return nil, errf(http.StatusUnprocessableEntity, field,
				"%s: %q is not in team %q's models [%s]: a key can only narrow its team's allowlist", field, m, t.Name, strings.Join(t.Models, ", "))
		}
	}
	return dedup(models), nil
}

// findKey returns the team's index and the key's index, or a 404 naming
// what is missing.
func (s *State) findKey(team, id string) (int, int, error) {
	i := s.team(team)
	if i < 0 {
		return -1, -1, errf(http.StatusNotFound, "team", "no team named %q", team)
	}
	j := slices.IndexFunc(s.Teams[i].Keys, func(k Key) bool { return k.ID == id })
	if j < 0 {
		return -1, -1, errf(http.StatusNotFound, "id", "team %q has no key with id %q", team, id)
	}
	return i, j, nil
}

// PatchKey changes an API key's name, expiry, models and limits (SPEC 3.1:
// live on every replica once the state is saved). A config key is changed
// in the file (409). aliases are the tier aliases a key's models may name.
func PatchKey(cur *State, team, id string, p KeyPatch, aliases map[string]bool, now time.Time) (*State, error) {
	i, j, err := cur.findKey(team, id)
	if err != nil {
		return nil, err
	}
	k := cur.Teams[i].Keys[j]
	if k.Source == SourceConfig {
		return nil, errf(http.StatusConflict, "id",
			"key %q comes from the config file: change its entry in teams[%s].keys in the file and reload", id, team)
	}
	if p.Name.Set {
		if k.Name, err = checkKeyName(valueOr(p.Name.Value)); err != nil {
			return nil, err
		}
	}
	if p.ExpiresAt.Set {
		k.ExpiresAt = nil
		if p.ExpiresAt.Value != nil {
			s := strings.TrimSpace(*p.ExpiresAt.Value)
			e, perr := time.Parse(time.RFC3339, s)
			if perr != nil {
				return nil, errf(http.StatusBadRequest, "expires_at", "expires_at: %q is not an RFC 3339 time such as 2027-01-31T00:00:00Z (null: never)", s)
			}
			if k.ExpiresAt, err = checkExpiry(&e, now); err != nil {
				return nil, err
			}
		}
	}
	if p.Models.Set {
		if k.Models, err = checkKeyModels(cur, &cur.Teams[i], valueOr(p.Models.Value), aliases); err != nil {
			return nil, err
		}
	}
	l := k.LimitsSpec
	for _, f := range []struct {
		p   Patch[int64]
		dst *int64
	}{{p.RPM, &l.RPM}, {p.TPM, &l.TPM}, {p.MaxParallel, &l.MaxParallel}} {
		if f.p.Set {
			*f.dst = valueOr(f.p.Value)
		}
	}
	if p.Budget.Set {
		l.Budget = nil
		if p.Budget.Value != nil {
			b := p.Budget.Value.over(k.Budget)
			l.Budget = &b
		}
	}
	if k.LimitsSpec, err = checkLevel("", l); err != nil {
		return nil, err
	}
	next := cur.Clone()
	next.Teams[i].Keys[j] = k
	return next, nil
}

// CheckUser validates an end-user id of the admin API (SPEC 3.1: 1 to 128
// bytes; an empty user is no user).
func CheckUser(user string) error {
	if user == "" || len(user) > MaxUserLen {
		return errf(http.StatusBadRequest, "user", "user: an end-user id is 1 to %d bytes, got %d", MaxUserLen, len(user))
	}
	return nil
}

// PutUser gives one end user of the team limits of their own (SPEC 3.1):
// a field u leaves nil keeps the team's user_limits value; 0 lifts that
// limit for this user. created reports whether the user had none before.
func PutUser(cur *State, team, user string, u UserSpec) (next *State, created bool, err error) {
	i := cur.team(team)
	if i < 0 {
		return nil, false, errf(http.StatusNotFound, "team", "no team named %q", team)
	}
	if err := CheckUser(user); err != nil {
		return nil, false, err
	}
	if !utf8.ValidString(user) {
		// the stored catalog is JSON, which writes U+FFFD for such bytes:
		// the override would belong to another id on every other replica
		// and after a restart (a request may still name such a user: the
		// team's user_limits apply to it)
		return nil, false, errf(http.StatusBadRequest, "user", "user: an end-user id with limits of its own must be UTF-8 text, got %q", user)
	}
	for _, f := range []struct {
		name string
		v    *int64
	}{{"rpm", u.RPM}, {"tpm", u.TPM}, {"max_parallel", u.MaxParallel}} {
		if f.v != nil {
			if err := checkCount(f.name, *f.v); err != nil {
				return nil, false, err
			}
		}
	}
	if u.Budget != nil {
		b, err := checkBudget("budget.", *u.Budget)
		if err != nil {
			return nil, false, err
		}
		if b.AlertAt == 0 {
			b.AlertAt = config.DefaultAlertAt
		}
		u.Budget = &b // usd 0 stays: this user has no budget
	}
	users := cur.Teams[i].Users
	_, had := users[user]
	if !had && len(users) >= MaxUserOverrides {
		return nil, false, errf(http.StatusUnprocessableEntity, "user",
			"user: team %q already has %d end users with limits of their own, the most it may hold: remove some with DELETE /admin/teams/%s/users/{user}, or set the team's user_limits (PUT /admin/teams/%s), which apply to every end user",
			team, MaxUserOverrides, team, team)
	}
	next = cur.Clone()
	t := &next.Teams[i]
	if t.Users == nil {
		t.Users = map[string]UserSpec{}
	}
	t.Users[user] = u
	return next, !had, nil
}

// DeleteUser returns an end user to the team's user_limits (SPEC 3.1);
// 404 when they had no limits of their own.
func DeleteUser(cur *State, team, user string) (*State, error) {
	i := cur.team(team)
	if i < 0 {
		return nil, errf(http.StatusNotFound, "team", "no team named %q", team)
	}
	if err := CheckUser(user); err != nil {
		return nil, err
	}
	if _, ok := cur.Teams[i].Users[user]; !ok {
		return nil, errf(http.StatusNotFound, "user", "end user %q of team %q has no limits of their own: the team's user_limits apply", user, team)
	}
	next := cur.Clone() // its Users maps are copies
	t := &next.Teams[i]
	delete(t.Users, user)
	if len(t.Users) == 0 {
		t.Users = nil
	}
	return next, nil
}
