package catalog

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"switchyard/config"
)

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

func teamState(t *testing.T) *State {
	t.Helper()
	st := baseState()
	st.Schema = schemaVersion
	st.Teams = []TeamSpec{
		{Name: "web", Models: []string{"a", "normal"}, Keys: configKeys(config.PlainKeys("sk-web"), t0)},
		{Name: "ops", Models: []string{"*"}, Keys: []Key{}},
	}
	st.Models = []ModelSpec{{Name: "a", Strategy: "adaptive", Objective: "latency"}}
	st.normalize()
	return st
}

var aliases = map[string]bool{"normal": true}

func TestPutTeamValidation(t *testing.T) {
	neg := int64(-1)
	cases := []struct {
		name   string
		team   string
		in     TeamInput
		status int
		field  string
	}{
		{"bad name", "a/b", TeamInput{Models: []string{"*"}}, 400, "name"},
		{"empty name", "", TeamInput{Models: []string{"*"}}, 400, "name"},
		{"long name", strings.Repeat("x", 65), TeamInput{Models: []string{"*"}}, 400, "name"},
		{"no models", "x", TeamInput{}, 422, "models"},
		{"unknown model", "x", TeamInput{Models: []string{"a", "zz"}}, 422, "models[1]"},
		{"negative rpm", "x", TeamInput{Models: []string{"*"}, RPM: neg}, 422, "rpm"},
		{"negative tpm", "x", TeamInput{Models: []string{"*"}, TPM: neg}, 422, "tpm"},
		{"negative parallel", "x", TeamInput{Models: []string{"*"}, MaxParallel: neg}, 422, "max_parallel"},
		{"negative budget", "x", TeamInput{Models: []string{"*"}, Budget: &Budget{USD: -1}}, 422, "budget.usd"},
		{"negative period", "x", TeamInput{Models: []string{"*"}, Budget: &Budget{USD: 1, Period: config.Period{Every: -1}}}, 422, "budget.period"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cur := teamState(t)
			_, _, err := PutTeam(cur, tc.team, tc.in, aliases)
			wantStatus(t, err, tc.status)
			if f := err.(*Error).Field; f != tc.field {
				t.Fatalf("field %q, want %q", f, tc.field)
			}
			if !strings.HasPrefix(err.Error(), tc.field+":") && tc.status != 400 {
				t.Fatalf("message must start with the field: %v", err)
			}
		})
	}
}

func TestPutTeamKeepsKeysAndDefaults(t *testing.T) {
	cur := teamState(t)
	next, created, err := PutTeam(cur, "web", TeamInput{Models: []string{"b", "normal", "b"}, RPM: 10}, aliases)
	if err != nil || created {
		t.Fatalf("%v created=%v", err, created)
	}
	w := next.Teams[next.team("web")]
	if len(w.Keys) != 1 || w.RPM != 10 || strings.Join(w.Models, ",") != "b,normal" || w.Budget.Period.Every != 720*time.Hour {
		t.Fatalf("%+v", w)
	}
	if len(cur.Teams[cur.team("web")].Models) != 2 || cur.Teams[cur.team("web")].RPM != 0 {
		t.Fatal("PutTeam changed its input state")
	}
	next, created, err = PutTeam(next, "new", TeamInput{Models: []string{"*"}}, aliases)
	if err != nil || !created || next.team("new") < 0 || next.Teams[next.team("new")].Keys == nil {
		t.Fatalf("create: %v %v", err, created)
	}
}

func TestDeleteTeamRemovesItsKeys(t *testing.T) {
	cur := teamState(t)
	cfg := &config.Config{}
	if Build(cfg, cur).Authenticate("sk-web") == nil {
		t.Fatal("config key must authenticate")
	}
	next, err := DeleteTeam(cur, "web")
	if err != nil {
		t.Fatal(err)
	}
	s := Build(cfg, next)
	if s.Authenticate("sk-web") != nil || s.Team("web") != nil {
		t.Fatal("a deleted team's key still authenticates")
	}
	_, err = DeleteTeam(next, "web")
	wantStatus(t, err, http.StatusNotFound)
}

func TestIssueKey(t *testing.T) {
	cur := teamState(t)
	next, iss, err := IssueKey(cur, "ops", KeyInput{Name: "ci"}, aliases, t0, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(iss.Key, KeyPrefix) || len(iss.Key) < len(KeyPrefix)+32 {
		t.Fatalf("key %q: want sk-sy- and >= 32 random characters", iss.Key)
	}
	for _, c := range iss.Key[len(KeyPrefix):] {
		if !strings.ContainsRune(base62, c) {
			t.Fatalf("character %q outside base62", c)
		}
	}
	if !strings.HasPrefix(iss.Key, iss.Entry.Prefix) || len(iss.Entry.Prefix) != len(KeyPrefix)+shownChars {
		t.Fatalf("prefix %q of %q", iss.Entry.Prefix, iss.Key)
	}
	sum := HashKey(iss.Key)
	if iss.Entry.Digest.String() != hex.EncodeToString(sum[:]) || iss.Entry.Source != SourceAPI || !iss.Entry.CreatedAt.Equal(t0) {
		t.Fatalf("%+v", iss.Entry)
	}
	b, _ := json.Marshal(next)
	if bytes.Contains(b, []byte(iss.Key)) || bytes.Contains(b, []byte(iss.Key[len(KeyPrefix)+shownChars:])) {
		t.Fatal("the stored state contains the clear key")
	}
	if Build(&config.Config{}, next).Authenticate(iss.Key).Name != "ops" {
		t.Fatal("issued key does not authenticate")
	}
	_, again, _ := IssueKey(cur, "ops", KeyInput{Name: "ci"}, aliases, t0, rand.Reader)
	if again.Key == iss.Key || again.Entry.ID == iss.Entry.ID {
		t.Fatal("two issues drew the same key")
	}

	past := t0.Add(-time.Second)
	bad := []struct {
		name, team, key string
		exp             *time.Time
		status          int
		field           string
	}{
		{"unknown team", "zz", "ci", nil, 404, "team"},
		{"no name", "ops", "  ", nil, 422, "name"},
		{"long name", "ops", strings.Repeat("n", 65), nil, 422, "name"},
		{"expired at issue", "ops", "ci", &past, 422, "expires_at"},
		{"expires now", "ops", "ci", &t0, 422, "expires_at"},
	}
	for _, tc := range bad {
		_, _, err := IssueKey(cur, tc.team, KeyInput{Name: tc.key, ExpiresAt: tc.exp}, aliases, t0, rand.Reader)
		wantStatus(t, err, tc.status)
		if err.(*Error).Field != tc.field {
			t.Fatalf("%s: field %q", tc.name, err.(*Error).Field)
		}
	}
	if _, _, err := IssueKey(cur, "ops", KeyInput{Name: "ci"}, aliases, t0, bytes.NewReader(nil)); err == nil {
		t.Fatal("a failing random source must fail the issue")
	}
}

func TestKeyExpiry(t *testing.T) {
	exp := t0.Add(time.Hour)
	next, iss, err := IssueKey(teamState(t), "ops", KeyInput{Name: "temp", ExpiresAt: &exp}, aliases, t0, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s := Build(&config.Config{}, next)
	cases := []struct {
		at time.Time
		ok bool
	}{{t0, true}, {exp.Add(-time.Nanosecond), true}, {exp, false}, {exp.Add(time.Hour), false}}
	for _, tc := range cases {
		if got := s.AuthenticateAt(iss.Key, tc.at) != nil; got != tc.ok {
			t.Fatalf("at %v: authenticated=%v want %v", tc.at, got, tc.ok)
		}
	}
}

func TestRevokeKey(t *testing.T) {
	cur := teamState(t)
	next, iss, _ := IssueKey(cur, "ops", KeyInput{Name: "ci"}, aliases, t0, rand.Reader)
	cfgID := cur.Teams[cur.team("web")].Keys[0].ID
	cases := []struct {
		name, team, id string
		status         int
		field          string
	}{
		{"unknown team", "zz", iss.Entry.ID, 404, "team"},
		{"unknown key", "ops", "key_nope", 404, "id"},
		{"other team's key", "web", iss.Entry.ID, 404, "id"},
		{"config key", "web", cfgID, 409, "id"},
	}
	for _, tc := range cases {
		_, err := RevokeKey(next, tc.team, tc.id)
		wantStatus(t, err, tc.status)
		if err.(*Error).Field != tc.field {
			t.Fatalf("%s: field %q", tc.name, err.(*Error).Field)
		}
	}
	after, err := RevokeKey(next, "ops", iss.Entry.ID)
	if err != nil {
		t.Fatal(err)
	}
	if Build(&config.Config{}, after).Authenticate(iss.Key) != nil {
		t.Fatal("a revoked key still authenticates")
	}
}

func TestKeyProblems(t *testing.T) {
	k := configKeys(config.PlainKeys("same"), t0)[0]
	cases := []struct {
		name  string
		teams []TeamSpec
		want  string
	}{
		{"clean", []TeamSpec{{Name: "a", Keys: []Key{k}}, {Name: "b"}}, ""},
		{"digest in two teams", []TeamSpec{{Name: "a", Keys: []Key{k}}, {Name: "b", Keys: []Key{k}}}, `also held by team "a"`},
		{"twice in one team", []TeamSpec{{Name: "a", Keys: []Key{k, {ID: "y", Digest: k.Digest}}}}, "held twice"},
		{"id twice", []TeamSpec{{Name: "a", Keys: []Key{{ID: "x", Digest: k.Digest}, {ID: "x", Digest: Digest{1}}}}}, "id used twice"},
		{"no digest", []TeamSpec{{Name: "a", Keys: []Key{{ID: "x"}}}}, "has no digest"},
	}
	for _, tc := range cases {
		p := (&State{Teams: tc.teams}).KeyProblems()
		got := strings.Join(p, "; ")
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Fatalf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestDigestText: a stored digest reads in either case and writes in lower
// case; anything else is refused with what is wrong.
func TestDigestText(t *testing.T) {
	k := configKeys(config.PlainKeys("same"), t0)[0]
	lower, _ := k.Digest.MarshalText()
	if string(lower) != strings.ToLower(string(lower)) || len(lower) != 64 {
		t.Fatalf("%s", lower)
	}
	var d Digest
	if err := d.UnmarshalText([]byte(strings.ToUpper(string(lower)))); err != nil || d != k.Digest {
		t.Fatalf("upper case: %v %x", err, d)
	}
	for _, bad := range []string{"zz", strings.Repeat("g", 64), strings.Repeat("0", 63)} {
		if err := d.UnmarshalText([]byte(bad)); err == nil || !strings.Contains(err.Error(), "64 hex digits") {
			t.Fatalf("%q: %v", bad, err)
		}
	}
	var st State
	if err := json.Unmarshal([]byte(`{"teams":[{"name":"a","keys":[{"id":"x","sha256":"zz"}]}]}`), &st); err == nil {
		t.Fatal("a malformed stored digest decoded")
	}
}

func TestSameKeyClearOrHashed(t *testing.T) {
	sum := HashKey("k1")
	h := hex.EncodeToString(sum[:])
	a := configKeys(config.PlainKeys("k1", "sha256:"+h, "sha256:"+strings.ToUpper(h)), t0)
	if len(a) != 1 {
		t.Fatalf("one key given three ways must be one key: %+v", a)
	}
}

func TestSyncConfigKeys(t *testing.T) {
	cur := teamState(t)
	cur, iss, _ := IssueKey(cur, "web", KeyInput{Name: "ci"}, aliases, t0, rand.Reader)
	cfg := &config.Config{Teams: []config.Team{
		{Name: "web", Keys: config.PlainKeys("sk-web2")},    // sk-web removed, sk-web2 added
		{Name: "ghost", Keys: config.PlainKeys("sk-ghost")}, // not in the catalog: not recreated
		{Name: "ops", Keys: config.PlainKeys("sk-web2")},    // the same key as web's: refused
	}}
	next, changed, problems := SyncConfigKeys(cur, cfg, t0.Add(time.Hour))
	if !changed || len(problems) != 1 || !strings.Contains(problems[0], "teams[ops].keys") {
		t.Fatalf("changed=%v problems=%v", changed, problems)
	}
	s := Build(&config.Config{}, next)
	if s.Authenticate("sk-web") != nil || s.Authenticate("sk-web2").Name != "web" || s.Authenticate(iss.Key).Name != "web" {
		t.Fatal("config keys not synced, or the API key was lost")
	}
	if s.Team("ghost") != nil || s.Authenticate("sk-ghost") != nil {
		t.Fatal("a team absent from the catalog was recreated")
	}
	if p := next.KeyProblems(); len(p) > 0 {
		t.Fatal(p)
	}
	again, changed, _ := SyncConfigKeys(next, cfg, t0.Add(2*time.Hour))
	if changed {
		t.Fatal("a second sync of the same file must change nothing")
	}
	if !again.Teams[again.team("web")].Keys[1].CreatedAt.Equal(t0.Add(time.Hour)) && !again.Teams[again.team("web")].Keys[0].CreatedAt.Equal(t0.Add(time.Hour)) {
		t.Fatal("a kept config key must keep its created_at")
	}
}

func TestPutModelValidation(t *testing.T) {
	cases := []struct {
		name, model string
		spec        ModelSpec
		status      int
		field       string
	}{
		{"no deployment", "zz", ModelSpec{Strategy: "cost"}, 404, "name"},
		{"name mismatch", "a", ModelSpec{Name: "b", Strategy: "cost"}, 400, "name"},
		{"no strategy", "a", ModelSpec{}, 422, "strategy"},
		{"bad strategy", "a", ModelSpec{Strategy: "fastest"}, 422, "strategy"},
		{"bad objective", "a", ModelSpec{Strategy: "adaptive", Objective: "speed"}, 422, "objective"},
	}
	for _, tc := range cases {
		_, err := PutModel(teamState(t), tc.model, tc.spec)
		wantStatus(t, err, tc.status)
		if err.(*Error).Field != tc.field {
			t.Fatalf("%s: field %q", tc.name, err.(*Error).Field)
		}
	}
	next, err := PutModel(teamState(t), "b", ModelSpec{Strategy: "least_busy"})
	if err != nil {
		t.Fatal(err)
	}
	s := Build(&config.Config{Routing: config.Routing{DefaultStrategy: "simple_shuffle"}}, next)
	if m := s.Model("b"); m.Strategy != "least_busy" || m.Objective != "balanced" {
		t.Fatalf("%+v", m)
	}
	if s.Model("a").Strategy != "adaptive" || s.Model("c").Strategy != "simple_shuffle" {
		t.Fatal("strategies")
	}
	back, err := DeleteModel(next, "b")
	if err != nil || back.model("b") >= 0 {
		t.Fatalf("delete: %v", err)
	}
	if _, err := DeleteModel(back, "b"); err != nil {
		t.Fatalf("deleting the strategy of a model on the default is a no-op, got %v", err)
	}
	_, err = DeleteModel(back, "zz")
	wantStatus(t, err, 404)
}

func TestRemovingAReferencedModelIsReported(t *testing.T) {
	cur := teamState(t)
	routes := []config.TierRoute{{Alias: "normal", Easy: "a", Hard: "b"}}
	if d := Dangling(cur, routes); len(d) != 0 {
		t.Fatalf("fresh state dangles: %v", d)
	}
	next, err := DeleteDeployment(cur, "a1")
	if err != nil {
		t.Fatal(err)
	}
	if d := NewlyDangling(cur, next, routes); len(d) != 0 {
		t.Fatalf("another deployment of a remains: %v", d)
	}
	last, err := DeleteDeployment(next, "a2")
	if err != nil {
		t.Fatal("removing a model an allowlist names is allowed:", err)
	}
	d := NewlyDangling(next, last, routes)
	want := []string{`smart_routing.routes[normal].easy: "a" has no deployment`, `teams[web].models[0]: "a" has no deployment`}
	if strings.Join(d, "|") != strings.Join(want, "|") {
		t.Fatalf("report %q, want %q", d, want)
	}
	if last.model("a") >= 0 {
		t.Fatal("the strategy of a model with no deployment left must go with it")
	}
	// a rename away from the last deployment prunes the strategy the same way
	st := teamState(t)
	st, _ = PutModel(st, "c", ModelSpec{Strategy: "cost"})
	st.Fallbacks = nil
	renamed, err := PutDeployment(st, dep("c1", "c2", "chat"), provs)
	if err != nil || renamed.model("c") >= 0 {
		t.Fatalf("rename: %v %+v", err, renamed.Models)
	}
}

func TestMigrateState(t *testing.T) {
	cfg := &config.Config{
		Models: []config.Model{{Name: "a", Strategy: "cost", Objective: "balanced"}},
		Teams:  []config.Team{{Name: "web", Keys: config.PlainKeys("sk-web"), Models: []string{"*"}}},
	}
	old := &State{Version: 7, Deployments: baseState().Deployments} // schema 1: no teams
	if !MigrateState(old, cfg) || old.Schema != schemaVersion || old.Version != 7 {
		t.Fatalf("%+v", old)
	}
	if Build(cfg, old).Authenticate("sk-web") == nil || Build(cfg, old).Model("a").Strategy != "cost" {
		t.Fatal("migration must bring the file's teams and models")
	}
	old.Teams = nil
	if MigrateState(old, cfg) || len(old.Teams) != 0 {
		t.Fatal("a current state is never reseeded")
	}

	// a running node's file teams are in its catalog, not its configuration
	served := SeedState(cfg)
	older := &State{Version: 8, Deployments: baseState().Deployments}
	if !MigrateFrom(older, served) || older.Schema != schemaVersion || older.Version != 8 {
		t.Fatalf("%+v", older)
	}
	if Build(cfg, older).Authenticate("sk-web") == nil || Build(cfg, older).Model("a").Strategy != "cost" {
		t.Fatal("migration must bring the served teams, keys included, and models")
	}
	older.Teams[0].Keys[0].Name = "changed"
	if served.Teams[0].Keys[0].Name == "changed" {
		t.Fatal("the migrated state must not share the served state's keys")
	}
	if older.Teams = nil; MigrateFrom(older, served) || len(older.Teams) != 0 {
		t.Fatal("a current state is never reseeded")
	}
}

func TestStateJSONRoundTrip(t *testing.T) {
	cur := teamState(t)
	exp := t0.Add(time.Hour)
	cur, _, _ = IssueKey(cur, "ops", KeyInput{Name: "ci", ExpiresAt: &exp}, aliases, t0, rand.Reader)
	cur.Teams[cur.team("ops")].Budget = Budget{USD: 5, Period: config.Period{Calendar: config.PeriodWeekly}}
	b, err := json.Marshal(cur)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(`"period":"weekly"`)) {
		t.Fatalf("period as the YAML writes it: %s", b)
	}
	var back State
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	b2, _ := json.Marshal(&back)
	if !bytes.Equal(b, b2) {
		t.Fatalf("round trip differs:\n%s\n%s", b, b2)
	}
	var d Duration
	for _, bad := range []string{`5`, `"5 minutes"`, `null`} {
		if err := json.Unmarshal([]byte(bad), &d); err == nil && bad != `null` {
			t.Fatalf("%s accepted", bad)
		}
	}
}

// TestSyncConfigKeysOrderAndCase: a key freed by one team in the same sync
// may be taken by a later one, and a digest written in upper case is the
// same key.
func TestSyncConfigKeysOrderAndCase(t *testing.T) {
	cur := teamState(t)
	sum := HashKey("sk-web")
	upper := "sha256:" + strings.ToUpper(hex.EncodeToString(sum[:]))
	cfg := &config.Config{Teams: []config.Team{
		{Name: "web", Keys: config.PlainKeys("sk-new")}, // frees sk-web
		{Name: "ops", Keys: config.PlainKeys(upper)},    // takes it, spelled as an upper-case digest
	}}
	next, _, problems := SyncConfigKeys(cur, cfg, t0)
	if len(problems) != 0 {
		t.Fatalf("a key freed earlier in the same sync was refused: %v", problems)
	}
	if s := Build(&config.Config{}, next); s.Authenticate("sk-web") == nil || s.Authenticate("sk-web").Name != "ops" {
		t.Fatal("sk-web must now belong to ops")
	}
	cfg.Teams = []config.Team{{Name: "ops", Keys: config.PlainKeys("sk-new")}} // web keeps it: refused
	if _, _, problems := SyncConfigKeys(next, cfg, t0); len(problems) != 1 {
		t.Fatalf("problems = %v, want the key web holds", problems)
	}
}

// BenchmarkSyncConfigKeys shows start and reload linear in keys: ns/op per
// key stays flat from 1,000 to 10,000 teams of 10 keys (it grew with the
// team count while each key's owner was found by a scan).
func BenchmarkSyncConfigKeys(b *testing.B) {
	for _, teams := range []int{1000, 10000} {
		cfg := &config.Config{}
		for i := range teams {
			ft := config.Team{Name: fmt.Sprintf("t%d", i), Models: []string{"*"}}
			for k := range 10 {
				ft.Keys = append(ft.Keys, config.KeySpec{Key: fmt.Sprintf("sk-t%d-k%d-0123456789abcdef", i, k)})
			}
			cfg.Teams = append(cfg.Teams, ft)
		}
		st := SeedState(cfg)
		b.Run(fmt.Sprintf("teams=%d", teams), func(b *testing.B) {
			for b.Loop() {
				SyncConfigKeys(st, cfg, t0)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(teams*10), "ns/key")
		})
	}
}

// configKeysUnchanged, the start's check that needs no list of keys, says
// unchanged exactly when SyncConfigKeys' full pass would change nothing and
// report nothing; an unchanged sync returns cur itself.
func TestConfigKeysUnchanged(t *testing.T) {
	base := &config.Config{Teams: []config.Team{{Name: "web", Keys: []config.KeySpec{{Key: "sk-a", Name: "a"}, {Key: "sk-b"}}}}}
	cur, _, _ := SyncConfigKeys(teamState(t), base, t0)
	spec := func(f func(*config.Team)) *config.Config {
		c := &config.Config{Teams: []config.Team{{Name: "web", Keys: append([]config.KeySpec(nil), base.Teams[0].Keys...)}}}
		f(&c.Teams[0])
		return c
	}
	rpm := int64(5)
	cases := []struct {
		name string
		cfg  *config.Config
		want bool
	}{
		{"same", base, true},
		{"other team only", &config.Config{Teams: append(base.Teams, config.Team{Name: "ghost", Keys: config.PlainKeys("sk-g")})}, true},
		{"renamed", spec(func(t *config.Team) { t.Keys[0].Name = "a2" }), false},
		{"limit added", spec(func(t *config.Team) { t.Keys[1].RPM = rpm }), false},
		{"removed", spec(func(t *config.Team) { t.Keys = t.Keys[:1] }), false},
		{"added", spec(func(t *config.Team) { t.Keys = append(t.Keys, config.KeySpec{Key: "sk-c"}) }), false},
		{"named twice", spec(func(t *config.Team) { t.Keys = append(t.Keys, t.Keys[0]) }), false},
	}
	for _, c := range cases {
		got := configKeysUnchanged(cur, c.cfg, t0.Add(time.Hour))
		next, changed, problems := SyncConfigKeys(cur, c.cfg, t0.Add(time.Hour))
		if got != c.want || (got && (changed || len(problems) > 0 || next != cur)) {
			t.Errorf("%s: unchanged %v (want %v), full pass changed %v problems %v same state %v", c.name, got, c.want, changed, problems, next == cur)
		}
	}
}
