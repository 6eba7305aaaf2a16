package catalog

import (
	"fmt"
	"runtime"
	"testing"

	"switchyard/config"
	"switchyard/internal/heaptest"
)

// manyTeams is the SPEC 16 figure's configuration: n teams of one key each,
// every one allowed all models, with rpm and tpm limits.
func manyTeams(n int) *config.Config {
	cfg := &config.Config{Deployments: []config.Deployment{{ID: "d", Model: "m", Provider: "p"}}}
	for i := range n {
		cfg.Teams = append(cfg.Teams, config.Team{Name: fmt.Sprintf("t%d", i), Keys: []config.KeySpec{{Key: fmt.Sprintf("sk-t%d", i)}},
			Models: []string{"*"}, RPM: 100000000, TPM: 100000000000})
	}
	return cfg
}

// liveBytes is how many heap bytes what make returns keeps alive, after a
// collection on both sides (0 when the heap shrank).
func liveBytes(make func() any) uint64 {
	_, b := heaptest.Retained(make)
	return uint64(max(b, 0))
}

// TestHeapPerTeam bounds what a snapshot and its state keep per team (SPEC
// 16: 10,000 teams in RSS < 150 MB): teams with the same allowlist share
// one, so a team is its record, its key's record and their index entries.
func TestHeapPerTeam(t *testing.T) {
	const n = 10000
	cfg := manyTeams(n)
	var st *State
	state := liveBytes(func() any { st = SeedState(cfg); return st }) / n
	snap := liveBytes(func() any { return Build(cfg, st) }) / n
	runtime.KeepAlive(cfg) // its release would count against what is measured
	t.Logf("per team: state %d B, snapshot %d B", state, snap)
	if snap > snapshotBytesPerTeam {
		t.Errorf("a snapshot keeps %d B per team, want <= %d", snap, snapshotBytesPerTeam)
	}
	if state > stateBytesPerTeam {
		t.Errorf("a state keeps %d B per team, want <= %d", state, stateBytesPerTeam)
	}
}

// The bounds, per team of one key and limits: a snapshot kept 740 B when
// every team had its own allowlist map, 483 B sharing it, 439 B with its
// teams found by name in a sorted slice instead of a map, 424 B with the
// teams in one array; a state keeps 416 B (its Key record is 192 of them),
// 384 B packed (pack).
const (
	snapshotBytesPerTeam = 520
	stateBytesPerTeam    = 460
)

// BenchmarkMarkCatalog is a full collection of a heap that holds the
// seeded state of 10,000 teams and the snapshot built from it, as a node
// does (BenchmarkMarkNothing: without them). Here, their objects made one
// after another, pack changed nothing measurable (1.3-1.4 ms more than
// the empty heap before and after); in a node, whose heap interleaves
// them with everything else made at start, it did (see pack).
func BenchmarkMarkCatalog(b *testing.B) {
	cfg := manyTeams(10000)
	st := SeedState(cfg)
	cfg = nil
	heaptest.Collect(b, []any{st, Build(&config.Config{}, st)})
}

// BenchmarkMarkNothing is BenchmarkMarkCatalog's collection without them.
func BenchmarkMarkNothing(b *testing.B) {
	heaptest.Collect(b, nil)
}
