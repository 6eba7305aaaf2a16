package config

import (
	"errors"
	"strings"
	"testing"
)

// A key's models narrow its team's allowlist (SPEC 3.1). For a team that
// allows every model ("*"), a key naming a model that no deployment serves
// and no tier route is (a typo) can call nothing: every request with it is
// 403. The file is refused at start naming the entry, as the admin API
// refuses it (422) and as a team's own allowlist entry is.
func TestHostile4KeyModelsOfAnAllowAllTeam(t *testing.T) {
	base := "providers: [{name: sim, kind: simulated}]\ndeployments: [{id: a, model: m, provider: sim}, {id: b, model: n, provider: sim}]\n" +
		"smart_routing: {routes: [{alias: auto, easy: m, hard: n}]}\n"
	for _, tc := range []struct{ teams, want string }{
		{`[{name: t, models: ["*"], keys: [{key: k2, models: [mm]}]}]`, `teams[0].keys[0].models[0]: "mm"`},
		{`[{name: t, models: ["*"], keys: [{key: k2, models: [m, auto, nn]}]}]`, `teams[0].keys[0].models[2]: "nn"`},
		{`[{name: t, models: ["*"], keys: [{key: k2, models: [m, auto, "*"]}]}]`, ``},
		{`[{name: t, models: [m, "*"], keys: [{key: k2, models: [n]}]}]`, ``},
	} {
		_, err := Load([]byte(base+"teams: "+tc.teams+"\n"), nil)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.teams, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want %q", tc.teams, err, tc.want)
		}
	}
}

// An integer setting must not take another value than the one written: a
// YAML number with a fraction was truncated (max_parallel: 0.5 became 0,
// no limit at all), and an empty string, which a ${VAR} that is not set
// leaves, became 0 (rpm: ${TEAM_RPM} lifted the team's limit). Both are
// problems at start, naming the field.
func TestHostile4WholeNumbers(t *testing.T) {
	base := "providers: [{name: sim, kind: simulated}]\ndeployments: [{id: a, model: m, provider: sim}]\n"
	for _, tc := range []struct{ doc, want string }{
		{`teams: [{name: t, models: ["*"], keys: [k1], max_parallel: 0.5}]`, "teams[0].max_parallel"},
		{`teams: [{name: t, models: ["*"], keys: [k1], rpm: 1.5}]`, "teams[0].rpm"},
		{`teams: [{name: t, models: ["*"], keys: [{key: k1, tpm: 0.25}]}]`, "teams[0].keys[0].tpm"},
		{`teams: [{name: t, models: ["*"], keys: [k1], rpm: "${TEAM_RPM}"}]`, "teams[0].rpm"},
		{`teams: [{name: t, models: ["*"], keys: [k1], user_limits: {rpm: "${USER_RPM}"}}]`, "teams[0].user_limits.rpm"},
	} {
		_, err := Load([]byte(base+tc.doc+"\n"), nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want a problem naming %s", tc.doc, err, tc.want)
		}
	}
	// whole numbers stay valid however they are written
	c, err := Load([]byte(base+`teams: [{name: t, models: ["*"], keys: [k1], rpm: 6e1, tpm: "${TPM}", max_parallel: 2.0}]`+"\n"), []string{"TPM=1000"})
	if err != nil {
		t.Fatal(err)
	}
	if tm := c.Teams[0]; tm.RPM != 60 || tm.TPM != 1000 || tm.MaxParallel != 2 {
		t.Fatalf("team %+v", tm)
	}
}

// Every problem names a field (SPEC 13): mapstructure's header line
// ("decoding failed due to the following error(s):") is not one, and was
// listed and counted as a problem of its own.
func TestHostile4DecodeProblemsNameAField(t *testing.T) {
	base := "providers: [{name: sim, kind: simulated}]\ndeployments: [{id: a, model: m, provider: sim}]\n"
	_, err := Load([]byte(base+`teams: [{name: t, models: ["*"], keys: [k1], rpm: abc, tpm: xyz}]`+"\n"), nil)
	var p Problems
	if !errors.As(err, &p) {
		t.Fatalf("%v", err)
	}
	if len(p) != 2 {
		t.Errorf("%d problems, want 2 (teams[0].rpm, teams[0].tpm): %q", len(p), p)
	}
	for _, line := range p {
		if !strings.Contains(line, "teams[0].") {
			t.Errorf("problem %q names no field", line)
		}
	}
}
