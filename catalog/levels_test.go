package catalog

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"switchyard/config"
)

func i64(v int64) *int64 { return &v }

// wantField asserts an *Error of status naming field.
func wantField(t *testing.T, err error, status int, field string) {
	t.Helper()
	wantStatus(t, err, status)
	if f := err.(*Error).Field; f != field {
		t.Fatalf("field %q, want %q (%v)", f, field, err)
	}
}

func TestIssueKeyWithLimitsAndModels(t *testing.T) {
	cur := teamState(t)
	in := KeyInput{Name: "bot", Models: []string{"a", "a"}, LimitsSpec: LimitsSpec{RPM: 5, TPM: 100, Budget: &Budget{USD: 3}}}
	next, iss, err := IssueKey(cur, "web", in, aliases, t0, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	k := iss.Entry
	if strings.Join(k.Models, ",") != "a" || k.RPM != 5 || k.TPM != 100 || k.Budget == nil ||
		k.Budget.Period.Every != 720*time.Hour || k.Budget.AlertAt != config.DefaultAlertAt {
		t.Fatalf("%+v budget %+v", k, k.Budget)
	}
	_, info := Build(&config.Config{}, next).AuthenticateKey(iss.Key, t0)
	if info == nil || info.Level() == nil || info.Level().RPM != 5 || info.Allows("normal") || !info.Allows("a") {
		t.Fatalf("the snapshot's key: %+v", info)
	}
	// a budget of usd 0 is none: the key has no level
	_, iss, _ = IssueKey(cur, "ops", KeyInput{Name: "free", LimitsSpec: LimitsSpec{Budget: &Budget{USD: 0, Period: config.Period{Calendar: "daily"}}}}, aliases, t0, rand.Reader)
	if iss.Entry.Budget != nil || iss.Entry.Models != nil {
		t.Fatalf("%+v", iss.Entry)
	}

	cases := []struct {
		name, team string
		in         KeyInput
		status     int
		field      string
	}{
		{"model outside allowlist", "web", KeyInput{Name: "x", Models: []string{"a", "b"}}, 422, "models[1]"},
		{"star under a list", "web", KeyInput{Name: "x", Models: []string{"*"}}, 422, "models[0]"},
		{"unknown model under star", "ops", KeyInput{Name: "x", Models: []string{"zz"}}, 422, "models[0]"},
		{"negative rpm", "ops", KeyInput{Name: "x", LimitsSpec: LimitsSpec{RPM: -1}}, 422, "rpm"},
		{"negative tpm", "ops", KeyInput{Name: "x", LimitsSpec: LimitsSpec{TPM: -1}}, 422, "tpm"},
		{"negative parallel", "ops", KeyInput{Name: "x", LimitsSpec: LimitsSpec{MaxParallel: -2}}, 422, "max_parallel"},
		{"negative budget", "ops", KeyInput{Name: "x", LimitsSpec: LimitsSpec{Budget: &Budget{USD: -1}}}, 422, "budget.usd"},
		{"alert over 1", "ops", KeyInput{Name: "x", LimitsSpec: LimitsSpec{Budget: &Budget{USD: 1, AlertAt: 2}}}, 422, "budget.alert_at"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := IssueKey(cur, tc.team, tc.in, aliases, t0, rand.Reader)
			wantField(t, err, tc.status, tc.field)
		})
	}
	// under "*" a key may name any served model or alias
	if _, _, err := IssueKey(cur, "ops", KeyInput{Name: "x", Models: []string{"b", "normal", "*"}}, aliases, t0, rand.Reader); err != nil {
		t.Fatal(err)
	}
}

// patch decodes a PATCH body as the admin API does.
func patch(t *testing.T, body string) KeyPatch {
	t.Helper()
	var p KeyPatch
	if err := json.Unmarshal([]byte(body), &p); err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	return p
}

func TestPatchKey(t *testing.T) {
	cur := teamState(t)
	exp := t0.Add(48 * time.Hour)
	cur, iss, err := IssueKey(cur, "web", KeyInput{Name: "bot", ExpiresAt: &exp, Models: []string{"a"},
		LimitsSpec: LimitsSpec{RPM: 5, TPM: 100, Budget: &Budget{USD: 3, Period: config.Period{Calendar: "daily"}}}}, aliases, t0, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	id := iss.Entry.ID
	key := func(st *State) Key {
		i, j, err := st.findKey("web", id)
		if err != nil {
			t.Fatal(err)
		}
		return st.Teams[i].Keys[j]
	}
	steps := []struct {
		name, body string
		check      func(Key) bool
	}{
		{"empty patch keeps all", `{}`, func(k Key) bool {
			return k.Name == "bot" && k.RPM == 5 && k.TPM == 100 && k.Budget.USD == 3 && k.ExpiresAt != nil && len(k.Models) == 1
		}},
		{"one field", `{"rpm":7}`, func(k Key) bool { return k.RPM == 7 && k.TPM == 100 }},
		{"0 clears a limit", `{"tpm":0}`, func(k Key) bool { return k.TPM == 0 && k.RPM == 7 }},
		{"null clears a limit", `{"rpm":null,"max_parallel":2}`, func(k Key) bool { return k.RPM == 0 && k.MaxParallel == 2 }},
		{"budget merges member by member", `{"budget":{"usd":9}}`, func(k Key) bool {
			return k.Budget.USD == 9 && k.Budget.Period.Calendar == "daily" && k.Budget.AlertAt == config.DefaultAlertAt
		}},
		{"budget member null is its default", `{"budget":{"period":null,"alert_at":0.5}}`, func(k Key) bool {
			return k.Budget.USD == 9 && k.Budget.Period.Every == 720*time.Hour && k.Budget.AlertAt == 0.5
		}},
		{"budget usd 0 clears it", `{"budget":{"usd":0}}`, func(k Key) bool { return k.Budget == nil }},
		{"budget on a key without one", `{"budget":{"usd":1,"period":"weekly"}}`, func(k Key) bool {
			return k.Budget.USD == 1 && k.Budget.Period.Calendar == "weekly"
		}},
		{"budget null clears it", `{"budget":null}`, func(k Key) bool { return k.Budget == nil }},
		{"models null: the team's", `{"models":null}`, func(k Key) bool { return k.Models == nil }},
		{"models set", `{"models":["normal"]}`, func(k Key) bool { return len(k.Models) == 1 && k.Models[0] == "normal" }},
		{"models empty: the team's", `{"models":[]}`, func(k Key) bool { return k.Models == nil }},
		{"expiry null: never", `{"expires_at":null}`, func(k Key) bool { return k.ExpiresAt == nil }},
		{"expiry set", `{"expires_at":"2026-12-31T00:00:00+01:00"}`, func(k Key) bool {
			return k.ExpiresAt.Equal(time.Date(2026, 12, 30, 23, 0, 0, 0, time.UTC)) && k.ExpiresAt.Location() == time.UTC
		}},
		{"rename", `{"name":"  robot "}`, func(k Key) bool { return k.Name == "robot" }},
	}
	for _, s := range steps {
		next, err := PatchKey(cur, "web", id, patch(t, s.body), aliases, t0)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if k := key(next); !s.check(k) {
			t.Fatalf("%s: %+v budget %+v", s.name, k, k.Budget)
		}
		if k := key(next); k.Digest != iss.Entry.Digest || k.Source != SourceAPI || !k.CreatedAt.Equal(t0) {
			t.Fatalf("%s: identity changed: %+v", s.name, k)
		}
		cur = next
	}
	before, _ := json.Marshal(cur)
	next, _ := PatchKey(cur, "web", id, patch(t, `{"rpm":11,"models":["a"]}`), aliases, t0)
	if after, _ := json.Marshal(cur); string(after) != string(before) {
		t.Fatal("PatchKey changed its input state")
	}
	_, info := Build(&config.Config{}, next).AuthenticateKey(iss.Key, t0)
	if info.Level() == nil || info.Level().RPM != 11 || !info.Allows("a") || info.Allows("normal") {
		t.Fatalf("the snapshot does not carry the patch: %+v", info)
	}

	cfgID := cur.Teams[cur.team("web")].Keys[0].ID
	cases := []struct {
		name, team, id, body string
		status               int
		field                string
	}{
		{"unknown team", "zz", id, `{"rpm":1}`, 404, "team"},
		{"unknown key", "web", "key_nope", `{"rpm":1}`, 404, "id"},
		{"config key", "web", cfgID, `{"rpm":1}`, 409, "id"},
		{"null name", "web", id, `{"name":null}`, 422, "name"},
		{"empty name", "web", id, `{"name":" "}`, 422, "name"},
		{"negative rpm", "web", id, `{"rpm":-1}`, 422, "rpm"},
		{"negative tpm", "web", id, `{"tpm":-5}`, 422, "tpm"},
		{"negative parallel", "web", id, `{"max_parallel":-1}`, 422, "max_parallel"},
		{"negative budget", "web", id, `{"budget":{"usd":-2}}`, 422, "budget.usd"},
		{"alert_at over 1", "web", id, `{"budget":{"usd":2,"alert_at":1.5}}`, 422, "budget.alert_at"},
		{"models outside allowlist", "web", id, `{"models":["a","b"]}`, 422, "models[1]"},
		{"bad expiry", "web", id, `{"expires_at":"soon"}`, 400, "expires_at"},
		{"past expiry", "web", id, `{"expires_at":"2020-01-01T00:00:00Z"}`, 422, "expires_at"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := PatchKey(cur, tc.team, tc.id, patch(t, tc.body), aliases, t0)
			wantField(t, err, tc.status, tc.field)
		})
	}
}

func TestKeyPatchDecoding(t *testing.T) {
	var p KeyPatch
	if err := json.Unmarshal([]byte(`{"rpm":null,"budget":{"usd":1}}`), &p); err != nil {
		t.Fatal(err)
	}
	if !p.RPM.Set || p.RPM.Value != nil || p.TPM.Set || !p.Budget.Set || !p.Budget.Value.USD.Set || p.Budget.Value.Period.Set {
		t.Fatalf("%+v", p)
	}
	for _, body := range []string{`{"budget":{"usd":1,"cap":2}}`, `{"budget":{"period":"a month"}}`, `{"rpm":"5"}`} {
		if err := json.Unmarshal([]byte(body), &KeyPatch{}); err == nil {
			t.Fatalf("%s must not decode", body)
		}
	}
}

func TestPutTeamUserLimitsKeepsUsers(t *testing.T) {
	cur := teamState(t)
	cur, _, err := PutUser(cur, "web", "alice", UserSpec{RPM: i64(50)})
	if err != nil {
		t.Fatal(err)
	}
	next, _, err := PutTeam(cur, "web", TeamInput{Models: []string{"a"}, UserLimits: &LimitsSpec{RPM: 10, TPM: 1000}}, aliases)
	if err != nil {
		t.Fatal(err)
	}
	w := next.Teams[next.team("web")]
	if w.UserLimits == nil || w.UserLimits.RPM != 10 || len(w.Users) != 1 {
		t.Fatalf("%+v", w)
	}
	team := Build(&config.Config{}, next).Team("web")
	if l := team.UserLevel("alice"); l == nil || l.RPM != 50 || l.TPM != 1000 || !team.UserOverride("alice") {
		t.Fatalf("alice: %+v", l)
	}
	if l := team.UserLevel("bob"); l == nil || l.RPM != 10 || team.UserOverride("bob") {
		t.Fatalf("bob: %+v", l)
	}
	// all-zero user_limits are none
	next, _, _ = PutTeam(next, "web", TeamInput{Models: []string{"a"}, UserLimits: &LimitsSpec{Budget: &Budget{}}}, aliases)
	if w := next.Teams[next.team("web")]; w.UserLimits != nil || len(w.Users) != 1 {
		t.Fatalf("%+v", w)
	}
	for _, tc := range []struct {
		in    LimitsSpec
		field string
	}{
		{LimitsSpec{RPM: -1}, "user_limits.rpm"},
		{LimitsSpec{MaxParallel: -1}, "user_limits.max_parallel"},
		{LimitsSpec{Budget: &Budget{USD: -1}}, "user_limits.budget.usd"},
		{LimitsSpec{Budget: &Budget{USD: 1, Period: config.Period{Every: -time.Hour}}}, "user_limits.budget.period"},
	} {
		_, _, err := PutTeam(cur, "web", TeamInput{Models: []string{"a"}, UserLimits: &tc.in}, aliases)
		wantField(t, err, 422, tc.field)
	}
}

func TestPutAndDeleteUser(t *testing.T) {
	cur := teamState(t)
	cur, _, _ = PutTeam(cur, "web", TeamInput{Models: []string{"a"}, UserLimits: &LimitsSpec{RPM: 10, TPM: 1000, Budget: &Budget{USD: 5}}}, aliases)
	next, created, err := PutUser(cur, "web", "alice@example.com", UserSpec{RPM: i64(0), MaxParallel: i64(2), Budget: &Budget{USD: 1, Period: config.Period{Calendar: "daily"}}})
	if err != nil || !created {
		t.Fatalf("%v created=%v", err, created)
	}
	if len(cur.Teams[cur.team("web")].Users) != 0 {
		t.Fatal("PutUser changed its input state")
	}
	l := Build(&config.Config{}, next).Team("web").UserLevel("alice@example.com")
	if l.RPM != 0 || l.TPM != 1000 || l.MaxParallel != 2 || l.Budget.USD != 1 || l.Budget.Period.Calendar != "daily" || l.Budget.AlertAt != config.DefaultAlertAt {
		t.Fatalf("rpm 0 lifts the team's, an omitted tpm keeps it: %+v", l)
	}
	again, created, err := PutUser(next, "web", "alice@example.com", UserSpec{})
	if err != nil || created {
		t.Fatalf("replace: %v created=%v", err, created)
	}
	if l := Build(&config.Config{}, again).Team("web").UserLevel("alice@example.com"); l.RPM != 10 || l.Budget.USD != 5 {
		t.Fatalf("an empty override is the team default: %+v", l)
	}
	after, err := DeleteUser(next, "web", "alice@example.com")
	if err != nil {
		t.Fatal(err)
	}
	if w := after.Teams[after.team("web")]; w.Users != nil || len(next.Teams[next.team("web")].Users) != 1 {
		t.Fatal("DeleteUser must drop the user from the next state only")
	}

	long := strings.Repeat("u", MaxUserLen+1)
	puts := []struct {
		name, team, user string
		u                UserSpec
		status           int
		field            string
	}{
		{"unknown team", "zz", "alice", UserSpec{}, 404, "team"},
		{"empty user", "web", "", UserSpec{}, 400, "user"},
		{"129-byte user", "web", long, UserSpec{}, 400, "user"},
		{"negative rpm", "web", "bob", UserSpec{RPM: i64(-1)}, 422, "rpm"},
		{"negative tpm", "web", "bob", UserSpec{TPM: i64(-1)}, 422, "tpm"},
		{"negative parallel", "web", "bob", UserSpec{MaxParallel: i64(-1)}, 422, "max_parallel"},
		{"negative budget", "web", "bob", UserSpec{Budget: &Budget{USD: -1}}, 422, "budget.usd"},
		{"alert_at over 1", "web", "bob", UserSpec{Budget: &Budget{USD: 1, AlertAt: 3}}, 422, "budget.alert_at"},
	}
	for _, tc := range puts {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := PutUser(cur, tc.team, tc.user, tc.u)
			wantField(t, err, tc.status, tc.field)
		})
	}
	if _, _, err := PutUser(cur, "web", strings.Repeat("u", MaxUserLen), UserSpec{}); err != nil {
		t.Fatalf("a 128-byte user is valid: %v", err)
	}
	dels := []struct {
		name, team, user string
		status           int
		field            string
	}{
		{"unknown team", "zz", "alice@example.com", 404, "team"},
		{"no override", "web", "bob", 404, "user"},
		{"bad user", "web", long, 400, "user"},
	}
	for _, tc := range dels {
		t.Run("delete "+tc.name, func(t *testing.T) {
			_, err := DeleteUser(next, tc.team, tc.user)
			wantField(t, err, tc.status, tc.field)
		})
	}
}

func TestUserOverridesAreBounded(t *testing.T) {
	cur := teamState(t)
	w := &cur.Teams[cur.team("web")]
	w.Users = make(map[string]UserSpec, MaxUserOverrides)
	for i := range MaxUserOverrides {
		w.Users[fmt.Sprint("u", i)] = UserSpec{}
	}
	_, _, err := PutUser(cur, "web", "one-more", UserSpec{RPM: i64(1)})
	wantField(t, err, 422, "user")
	if !strings.Contains(err.Error(), "DELETE /admin/teams/web/users/") || !strings.Contains(err.Error(), "user_limits") {
		t.Fatalf("the message must say how to fix it: %v", err)
	}
	if _, _, err := PutUser(cur, "web", "u7", UserSpec{RPM: i64(1)}); err != nil {
		t.Fatalf("changing an existing override is always allowed: %v", err)
	}
}
