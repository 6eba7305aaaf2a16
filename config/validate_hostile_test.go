package config

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
)

// noTeams is minimal without its teams.
const noTeams = `
providers:
  - {name: sim, kind: simulated}
deployments:
  - {id: a, model: m, provider: sim}
`

// Configuration mistakes that used to pass validation (SPEC 11, 13, 15):
// each must be reported, naming its field, by `switchyard check` and at
// start, and a reload of such a file must be refused whole.
func TestValidationHostileMistakes(t *testing.T) {
	sum := sha256.Sum256([]byte("sk-admin-and-team"))
	digest := "sha256:" + hex.EncodeToString(sum[:])
	long := strings.Repeat("x", 300)
	cases := []struct {
		name, yaml, want string
	}{
		// a team key that is also the admin key: every holder of the team key
		// could call the admin API (SPEC 11: the admin key is separate from
		// team keys), in clear or as its digest, in any case of hex
		{"admin key reused as team key", noTeams + "admin: {key: sk-admin-and-team}\n" +
			"teams: [{name: t, keys: [sk-admin-and-team], models: ['*']}]\n", "teams[0].keys[0]: the same key is admin.key"},
		{"admin key digest reused as team key", noTeams + "admin: {key: sk-admin-and-team}\n" +
			"teams: [{name: t, keys: ['" + digest[:7] + strings.ToUpper(digest[7:]) + "'], models: ['*']}]\n", "the same key is admin.key"},
		{"admin key given as digest, team key in clear", noTeams + "admin: {key: '" + digest + "'}\n" +
			"teams: [{name: t, keys: [{key: sk-admin-and-team, name: ci}], models: ['*']}]\n", "teams[0].keys[0]: the same key is admin.key"},
		// one key twice in a team with different settings: only the first
		// entry counted, the second's limits were dropped without a word
		{"key twice in a team, limits differ", noTeams +
			"teams: [{name: t, models: ['*'], keys: [sk-dup, {key: sk-dup, name: ci, rpm: 60}]}]\n", "teams[0].keys[1]: the same key is already teams[0].keys[0]"},
		// team names: a file could seed names no admin URL can address
		// (/admin/teams/{name}) and of any length into every per-team
		// metric series, log line and Redis key
		{"team name with a slash", noTeams + "teams: [{name: 'a/b', keys: [k], models: ['*']}]\n", "teams[0].name"},
		{"team name with a newline", noTeams + "teams: [{name: \"a\\nb\", keys: [k], models: ['*']}]\n", "teams[0].name"},
		{"team name too long", noTeams + "teams: [{name: " + long + ", keys: [k], models: ['*']}]\n", "teams[0].name"},
		{"team name dot-dot", noTeams + "teams: [{name: '..', keys: [k], models: ['*']}]\n", "teams[0].name"},
		// a brace ends or opens the Redis Cluster hash tag a team's and a
		// deployment's keys are written under ({team:<name>}): team "a}:x"
		// would write into team "a"'s slot and name space
		{"team name with a closing brace", noTeams + "teams: [{name: 'a}:x', keys: [k], models: ['*']}]\n", "teams[0].name"},
		{"team name with an opening brace", noTeams + "teams: [{name: 'a{b', keys: [k], models: ['*']}]\n", "teams[0].name"},
		{"deployment id with a brace", "providers: [{name: p, kind: simulated}]\ndeployments: [{id: 'd}:x', model: m, provider: p}]\n", "deployments[0].id"},
		{"key name too long", noTeams + "teams: [{name: t, keys: [{key: k, name: " + long + "}], models: ['*']}]\n", "teams[0].keys[0].name"},
		// deployment ids and public model names reach metric labels,
		// response headers and Redis keys: bounded, no control characters
		{"deployment id too long", "providers: [{name: p, kind: simulated}]\ndeployments: [{id: " + long + ", model: m, provider: p}]\n", "deployments[0].id"},
		{"deployment id control", "providers: [{name: p, kind: simulated}]\ndeployments: [{id: \"a\\nb\", model: m, provider: p}]\n", "deployments[0].id"},
		{"model name too long", "providers: [{name: p, kind: simulated}]\ndeployments: [{id: a, model: " + long + ", provider: p}]\n", "deployments[0].model"},
		{"model name control", "providers: [{name: p, kind: simulated}]\ndeployments: [{id: a, model: \"m\\r\\nx\", provider: p}]\n", "deployments[0].model"},
		{"tier alias too long", minimal + "smart_routing: {routes: [{alias: " + long + ", easy: m, hard: m}]}\n", "smart_routing.routes[0].alias"},
		// two chains for one (primary, reason): one silently replaced the other
		{"fallback chain twice", "providers: [{name: p, kind: simulated}]\n" +
			"deployments: [{id: a, model: m, provider: p}, {id: b, model: m2, provider: p}, {id: c, model: m3, provider: p}]\n" +
			"routing: {fallbacks: [{primary: m, models: [m2]}, {primary: m, reason: general, models: [m3]}]}\n", "routing.fallbacks[1]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load([]byte(tc.yaml), nil)
			if err == nil {
				t.Fatalf("want a problem mentioning %q, got none", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want a problem mentioning %q, got:\n%v", tc.want, err)
			}
			if strings.Contains(err.Error(), "sk-admin-and-team") {
				t.Fatalf("a problem quotes a key:\n%v", err)
			}
		})
	}
}

// What the rules above must keep accepting.
func TestValidationHostileMistakesAllowed(t *testing.T) {
	sum := sha256.Sum256([]byte("sk-same"))
	for name, yml := range map[string]string{
		"one key twice in a team, same settings": noTeams +
			"teams: [{name: t, models: ['*'], keys: [sk-same, 'sha256:" + hex.EncodeToString(sum[:]) + "']}]\n",
		"team names of the admin API's alphabet": noTeams +
			"teams: [{name: Team_1.prod-eu, keys: [k1], models: ['*']}, {name: " + strings.Repeat("t", 64) + ", keys: [k2], models: ['*']}]\n",
		"usual deployment ids and model names": "providers: [{name: p, kind: simulated}]\n" +
			"deployments: [{id: openai.gpt-4o_eu:1, model: 'accounts/fireworks/models/llama-v3p1-405b-instruct', provider: p}]\n",
		"a chain per reason": "providers: [{name: p, kind: simulated}]\n" +
			"deployments: [{id: a, model: m, provider: p}, {id: b, model: m2, provider: p}]\n" +
			"routing: {fallbacks: [{primary: m, models: [m2]}, {primary: m, reason: context_window, models: [m2]}]}\n",
		"admin key and team keys differ": minimal + "admin: {key: admin-secret}\n",
	} {
		if _, err := Load([]byte(yml), nil); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// Floats that are not numbers: YAML reads .nan and .inf (and an
// environment override "NaN") as floats, and NaN passed every "must not be
// negative" check. A NaN price made every cost NaN; a NaN budget.usd was
// silently no budget at all.
func TestValidationNotANumber(t *testing.T) {
	dep := "providers: [{name: p, kind: simulated}]\ndeployments: [{id: a, model: m, provider: p%s}]\n"
	cases := []struct {
		name, yaml string
		env        []string
		want       string
	}{
		{"price NaN", fmt.Sprintf(dep, ", price: {input: .nan, output: 1}"), nil, "deployments[0].price"},
		{"price Inf", fmt.Sprintf(dep, ", price: {input: 1, output: .inf}"), nil, "deployments[0].price"},
		{"cached_input Inf", fmt.Sprintf(dep, ", price: {input: 1, output: 1, cached_input: .inf}"), nil, "deployments[0].price.cached_input"},
		{"weight NaN", fmt.Sprintf(dep, ", weight: .nan"), nil, "deployments[0].weight"},
		{"weight Inf", fmt.Sprintf(dep, ", weight: .inf"), nil, "deployments[0].weight"},
		{"team budget NaN", noTeams + "teams: [{name: t, keys: [k], models: ['*'], budget: {usd: .nan}}]\n", nil, "teams[0]: rpm, tpm, max_parallel and budget.usd"},
		{"key budget Inf", noTeams + "teams: [{name: t, keys: [{key: k, budget: {usd: .inf}}], models: ['*']}]\n", nil, "teams[0].keys[0]: rpm"},
		{"latency_buffer NaN by env", minimal, []string{"SWITCHYARD_ROUTING_LATENCY_BUFFER=NaN"}, "routing.latency_buffer"},
		{"min_weight_fraction NaN", minimal + "routing: {min_weight_fraction: .nan}\n", nil, "routing.min_weight_fraction"},
		{"warm_cache_weight Inf", minimal + "routing: {warm_cache_weight: .inf}\n", nil, "routing.warm_cache_weight"},
		{"sample_ratio NaN", minimal + "tracing: {sample_ratio: .nan}\n", nil, "tracing.sample_ratio"},
		{"error_rate NaN", "providers: [{name: p, kind: simulated, simulate: {error_rate: .nan}}]\n", nil, "simulate.error_rate"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load([]byte(tc.yaml), tc.env)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want a problem mentioning %q, got %v", tc.want, err)
			}
		})
	}
}
