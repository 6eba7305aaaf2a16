package catalog

import (
	"encoding/json"
	"testing"

	"switchyard/config"
)

// TestTeamCacheSwitch: a team's response-cache switch lives in the catalog
// (SPEC 11, 18): seeded from the file, taken by PutTeam (absent: inherit),
// carried by Build to the team record, kept by a JSON round trip of the
// store, and brought into a stored state of schema 2 (which held none) from
// the file, or on a running node from the state it serves, without touching
// anything else of that state.
func TestTeamCacheSwitch(t *testing.T) {
	on, off := true, false
	cfg := &config.Config{Teams: []config.Team{
		{Name: "web", Keys: config.PlainKeys("sk-web"), Models: []string{"*"}, Cache: config.TeamCache{Enabled: &off}},
		{Name: "ops", Keys: config.PlainKeys("sk-ops"), Models: []string{"*"}},
	}}
	enabled := func(s *Snapshot, key string) *bool { return s.Authenticate(key).Cache.Enabled }

	st := SeedState(cfg)
	if e := enabled(Build(cfg, st), "sk-web"); e == nil || *e {
		t.Fatalf("seeded web: %v, want off", e)
	}
	if e := enabled(Build(cfg, st), "sk-ops"); e != nil {
		t.Fatalf("seeded ops: %v, want unset", *e)
	}

	cases := []struct {
		name string
		in   *TeamCache
		want *bool
	}{
		{"on", &TeamCache{Enabled: &on}, &on},
		{"off", &TeamCache{Enabled: &off}, &off},
		{"enabled null", &TeamCache{}, nil},
		{"absent", nil, nil},
	}
	for _, tc := range cases {
		next, _, err := PutTeam(st, "ops", TeamInput{Models: []string{"*"}, Cache: tc.in}, nil)
		if err != nil {
			t.Fatal(err)
		}
		// through the store's JSON, as another replica reads it
		b, _ := json.Marshal(next)
		var back State
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		for _, s := range []*State{next, &back} {
			got := enabled(Build(cfg, s), "sk-ops")
			if (got == nil) != (tc.want == nil) || (got != nil && *got != *tc.want) {
				t.Fatalf("%s: switch %v, want %v", tc.name, got, tc.want)
			}
		}
		if e := enabled(Build(cfg, next), "sk-web"); e == nil || *e {
			t.Fatalf("%s: another team's switch moved: %v", tc.name, e)
		}
	}

	// a stored state of schema 2: its teams (here changed through the API
	// since: web's rpm) take the file's switch, once, and keep the rest
	v2 := st.Clone()
	v2.Schema = 2
	for i := range v2.Teams {
		v2.Teams[i].Cache = nil
		if v2.Teams[i].Name == "web" {
			v2.Teams[i].RPM = 42
		}
	}
	if !MigrateState(v2, cfg) || v2.Schema != schemaVersion {
		t.Fatalf("schema 2 not migrated: %d", v2.Schema)
	}
	s := Build(cfg, v2)
	if e := enabled(s, "sk-web"); e == nil || *e || s.Authenticate("sk-web").RPM != 42 {
		t.Fatalf("migrated web: switch %v rpm %d", e, s.Authenticate("sk-web").RPM)
	}
	if MigrateState(v2, cfg) {
		t.Fatal("a current state migrated again")
	}

	// a running node meeting a schema-2 state (a replica not yet upgraded
	// wrote it): its teams take the served state's switches
	v2 = st.Clone()
	v2.Schema = 2
	v2.Teams[0].Cache, v2.Teams[1].Cache = nil, nil
	if !MigrateFrom(v2, st) || v2.Schema != schemaVersion {
		t.Fatal("schema 2 not migrated from the served state")
	}
	if e := enabled(Build(cfg, v2), "sk-web"); e == nil || *e {
		t.Fatalf("migrated from served: %v", e)
	}

	// a clone's switch is its own
	c := st.Clone()
	for i := range c.Teams {
		if c.Teams[i].Cache != nil {
			*c.Teams[i].Cache = TeamCache{Enabled: &on}
		}
	}
	if e := enabled(Build(cfg, st), "sk-web"); e == nil || *e {
		t.Fatal("a clone's change reached the original")
	}
}
