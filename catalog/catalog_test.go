package catalog

import (
	"crypto/sha256"
	"encoding/hex"
	"math"
	"sync"
	"testing"

	"switchyard/config"
)

func testConfig(t *testing.T) *config.Config {
	t.Helper()
	sum := sha256.Sum256([]byte("hashed-key"))
	yml := `
providers: [{name: sim, kind: simulated}]
deployments:
  - {id: b, model: m, provider: sim, operations: [chat, embeddings]}
  - {id: a, model: m, provider: sim, enabled: false}
  - {id: c, model: n, provider: sim, supports_tools: false}
models: [{name: m, strategy: round_robin}]
teams:
  - {name: open, keys: ["clear-key"], models: ["*"]}
  - {name: narrow, keys: ["sha256:` + hex.EncodeToString(sum[:]) + `"], models: [n]}
routing:
  fallbacks: [{primary: m, reason: context_window, models: [n]}]
`
	c, err := config.Load([]byte(yml), nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestBuild(t *testing.T) {
	cfg := testConfig(t)
	s := Build(cfg, SeedState(cfg))
	m := s.Model("m")
	if m == nil || m.Strategy != "round_robin" || len(m.Pool) != 2 || m.Pool[0].ID != "a" {
		t.Fatalf("model m: %+v", m)
	}
	if m.Pool[0].On || !m.Pool[1].On || !m.Pool[1].Serves(OpEmbeddings) || m.Pool[0].Serves(OpEmbeddings) {
		t.Fatal("enabled/ops not resolved")
	}
	if s.Model("n").Strategy != "simple_shuffle" || s.Deployments["c"].Tools {
		t.Fatal("defaults for model n / tools")
	}
	if got := s.Chain("m", ReasonContextWindow); len(got) != 1 || got[0] != "n" {
		t.Fatalf("chain: %v", got)
	}
	if s.Chain("m", ReasonGeneral) != nil {
		t.Fatal("general must not stand in for context_window")
	}
}

func TestAuthenticate(t *testing.T) {
	cfg := testConfig(t)
	s := Build(cfg, SeedState(cfg))
	cases := []struct {
		key, team string
	}{
		{"clear-key", "open"},
		{"hashed-key", "narrow"},
		{"sha256:" + hex.EncodeToString(make([]byte, 32)), ""},
		{"wrong", ""},
		{"", ""},
	}
	for _, tc := range cases {
		got := s.Authenticate(tc.key)
		name := ""
		if got != nil {
			name = got.Name
		}
		if name != tc.team {
			t.Errorf("key %q: got team %q want %q", tc.key, name, tc.team)
		}
	}
	narrow := s.Authenticate("hashed-key")
	if narrow.Allows("m") || !narrow.Allows("n") {
		t.Fatal("allowlist")
	}
}

func TestExpectedCost(t *testing.T) {
	d := &Deployment{Deployment: config.Deployment{Price: config.Price{Input: 1, Output: 2}}}
	if got := d.ExpectedCost(1_000_000, 500_000); got != 2 {
		t.Fatalf("cost %v", got)
	}
}

// TestHolderVersionsOnlyMoveForward: a watcher's reload of an older version
// racing an admin publish of a newer one never leaves the older one served
// (SPEC 9); the same version is taken (a rebuild, e.g. a config reload).
func TestHolderVersionsOnlyMoveForward(t *testing.T) {
	h := NewHolder(&Snapshot{Version: 1})
	if !h.Store(&Snapshot{Version: 1}) {
		t.Fatal("same version refused")
	}
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// admin publishes 2..33 while the watcher re-applies stale copies
			if i%2 == 0 {
				h.Store(&Snapshot{Version: int64(2 + i/2)})
			} else {
				h.Store(&Snapshot{Version: 1})
			}
		}()
	}
	wg.Wait()
	if v := h.Load().Version; v != 33 {
		t.Fatalf("served version %d after the race, want the newest (33)", v)
	}
	if h.Store(&Snapshot{Version: 5}) || h.Load().Version != 33 {
		t.Fatal("an older version replaced a newer one")
	}
}

// TestCost pins SPEC 10.2's formula on the normalized counts: cached and
// cache-write input priced apart (input when unset), the rest at input;
// parts larger than the whole earn no discount.
func TestCost(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	plain := config.Price{Input: 3, Output: 15}
	cached := config.Price{Input: 3, Output: 15, CachedInput: f(0.3), CacheWrite: f(3.75)}
	free := config.Price{Input: 3, Output: 15, CachedInput: f(0), CacheWrite: f(0)}
	for _, tc := range []struct {
		name                               string
		price                              config.Price
		prompt, cached, cacheWrite, output int
		want                               float64
	}{
		{"no cache", cached, 1000, 0, 0, 100, 0.0045},
		{"unset cache prices are input", plain, 1000, 600, 300, 100, 0.0045},
		{"read and write", cached, 1000, 600, 300, 100, (100*3 + 600*0.3 + 300*3.75 + 100*15) / 1e6},
		{"free cache", free, 1000, 600, 300, 100, (100*3 + 100*15) / 1e6},
		{"read over the whole", cached, 100, 500, 0, 0, 100 * 3 / 1e6},
		{"parts over the whole", cached, 100, 60, 50, 0, 100 * 3 / 1e6},
		{"negative parts", cached, 100, -5, -5, -5, 300 / 1e6},
	} {
		d := &Deployment{Deployment: config.Deployment{Price: tc.price}}
		got := d.Cost(tc.prompt, tc.cached, tc.cacheWrite, tc.output)
		if math.Abs(got-tc.want) > 1e-15 {
			t.Errorf("%s: cost %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestTeamByName: Team finds every team of a state, sorted (normalized) or
// not, and nothing else.
func TestTeamByName(t *testing.T) {
	cfg := &config.Config{}
	for _, names := range [][]string{{"a", "b", "c"}, {"c", "a", "b"}, {}} {
		st := &State{}
		for _, n := range names {
			st.Teams = append(st.Teams, TeamSpec{Name: n, Models: []string{"*"}})
		}
		s := Build(cfg, st)
		for _, n := range names {
			if tm := s.Team(n); tm == nil || tm.Name != n {
				t.Fatalf("%v: Team(%q) = %v", names, n, tm)
			}
		}
		for _, n := range []string{"", "0", "bb", "d"} {
			if tm := s.Team(n); tm != nil {
				t.Fatalf("%v: Team(%q) = %q, want nil", names, n, tm.Name)
			}
		}
		if got := len(s.Teams); got != len(names) || (len(names) > 0 && s.Teams[0].Name != names[0]) {
			t.Fatalf("%v: Teams reordered", names)
		}
	}
}
