package edge

import (
	"fmt"
	"testing"
	"unsafe"

	"switchyard/internal/heaptest"
	"switchyard/internal/registry"
	"switchyard/internal/teamtest"
)

// servedTeams are the records of teams teams as a node keeps them once
// each has served a request on two deployments: registered by name, with
// their limit arguments (RPM and TPM) and a usage row a deployment pending.
func servedTeams(teams []string) *registry.Map[*teamState] {
	var m registry.Map[*teamState]
	for _, name := range teams {
		ts := newTeamState("sy:", name, "node-1")
		ts.keys.limitArgs(teamtest.Team(name, teamtest.Limits{RPM: 100_000_000, TPM: 100_000_000_000}))
		ts.usage = addUsage(addUsage(ts.usage, "d1", 25, 0.001), "d2", 25, 0.001)
		m.LoadOrStore(name, ts)
	}
	return &m
}

func teamNames(n int) []string {
	teams := make([]string, n)
	for i := range teams {
		teams[i] = fmt.Sprintf("t%d", i)
	}
	return teams
}

// TestTeamStateBytes bounds a served team's record on a node (SPEC 16:
// 10,000 teams stay flat): its bytes and objects, which the collector
// marks on every cycle, and the record's own size. The record was 600 B
// (640 with its size class, past the collector's small objects) before its
// keys were cut from one string on demand, its times kept as integers and
// its Cluster combiner made only on Cluster; a served team kept four
// objects before teams of equal limits shared their limit arguments.
func TestTeamStateBytes(t *testing.T) {
	const n = 10000
	teams := teamNames(n)
	objects, bytes := heaptest.Retained(func() any { return servedTeams(teams) })
	t.Logf("teamState %d B; a served team %d B and %.2f objects", unsafe.Sizeof(teamState{}), bytes/n, float64(objects)/n)
	if size := unsafe.Sizeof(teamState{}); size > 448 {
		t.Errorf("teamState is %d B, want <= 448", size)
	}
	if per := bytes / n; per > 800 {
		t.Errorf("a served team keeps %d B, want <= 800", per)
	}
	// the record, its keys' string and its usage rows
	if objs := float64(objects) / n; objs > 3.5 {
		t.Errorf("a served team keeps %.2f objects, want <= 3.5", objs)
	}
}

// BenchmarkMarkTeamStates is a full collection of a heap that holds the
// records of 10,000 served teams (BenchmarkMarkNothing: without them).
func BenchmarkMarkTeamStates(b *testing.B) {
	kept := servedTeams(teamNames(10000))
	heaptest.Collect(b, kept)
}

// BenchmarkMarkNothing is BenchmarkMarkTeamStates' collection without the
// records.
func BenchmarkMarkNothing(b *testing.B) {
	heaptest.Collect(b, nil)
}
