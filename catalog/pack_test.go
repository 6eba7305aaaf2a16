package catalog

import (
	"fmt"
	"slices"
	"testing"

	"switchyard/config"
	"switchyard/internal/heaptest"
)

// mixedTeams are n teams of one key each, of two model lists in turn.
func mixedTeams(n int) *config.Config {
	cfg := &config.Config{Teams: make([]config.Team, n)}
	for i := range cfg.Teams {
		models := []string{"*"}
		if i%2 == 1 {
			models = []string{"a", "b"}
		}
		cfg.Teams[i] = config.Team{Name: fmt.Sprintf("t%05d", i), Keys: config.PlainKeys(fmt.Sprintf("sk-t%d", i)), Models: models, RPM: 100}
	}
	return cfg
}

// TestCatalogObjectsPerTeam bounds what a node's catalog keeps per team
// (SPEC 16: 10,000 teams stay flat): the seeded state and the snapshot
// built from it, and a clone of the state (every admin change makes one).
// The collector visits each of these objects on every cycle. Before pack
// and the snapshot's one array of teams a team kept five: its key list,
// its model list, its key's default name, its key's id and its snapshot
// record. Its key's id and prefix (one string) are left.
func TestCatalogObjectsPerTeam(t *testing.T) {
	const n = 10000
	cfg := manyTeams(n)
	objects, bytes := heaptest.Retained(func() any {
		st := SeedState(cfg)
		return []any{st, Build(cfg, st)}
	})
	t.Logf("seeded and built: %d B and %.2f objects a team", bytes/n, float64(objects)/n)
	if per := float64(objects) / n; per > 1.5 {
		t.Errorf("a team keeps %.2f objects in the seeded state and its snapshot, want <= 1.5", per)
	}
	st := SeedState(cfg)
	objects, _ = heaptest.Retained(func() any { return st.Clone() })
	t.Logf("a clone: %.2f objects a team", float64(objects)/n)
	if per := float64(objects) / n; per > 0.5 {
		t.Errorf("a clone keeps %.2f objects a team, want <= 0.5", per)
	}
}

// A packed state's lists are windows that cannot grow into their
// neighbours, teams with the same models share a list and with other
// models do not, and a clone shares nothing with its source.
func TestPackWindows(t *testing.T) {
	cfg := mixedTeams(4)
	cfg.Teams[2].Keys = append(cfg.Teams[2].Keys, config.PlainKeys("sk-extra")...)
	st := SeedState(cfg)
	for i, tm := range st.Teams {
		if cap(tm.Keys) != len(tm.Keys) || cap(tm.Models) != len(tm.Models) {
			t.Fatalf("team %d: room to grow (keys %d/%d, models %d/%d)", i, len(tm.Keys), cap(tm.Keys), len(tm.Models), cap(tm.Models))
		}
	}
	if &st.Teams[0].Models[0] != &st.Teams[2].Models[0] || &st.Teams[0].Models[0] == &st.Teams[1].Models[0] {
		t.Fatal("teams of one model list must share it, of another must not")
	}
	next := st.Clone()
	next.Teams[1].Keys = append(next.Teams[1].Keys, Key{ID: "k-new"})
	if next.Teams[2].Keys[0].ID == "k-new" || len(next.Teams[2].Keys) != 2 {
		t.Fatal("an append to a team's keys must not write into the next team's")
	}
	next.Teams[2].Keys[1].Name = "renamed"
	if st.Teams[2].Keys[1].Name == "renamed" {
		t.Fatal("a clone's key must not be its source's")
	}
	if &next.Teams[0].Models[0] == &st.Teams[0].Models[0] || !slices.Equal(next.Teams[0].Models, []string{"*"}) {
		t.Fatal("a clone's model lists must be its own copies")
	}
	// lists whose joined texts agree are still told apart
	l := modelLists{}
	if a, b := l.of([]string{"a:b"}), l.of([]string{"a", "b"}); slices.Equal(a, b) {
		t.Fatal("different model lists must not be shared")
	}
}
