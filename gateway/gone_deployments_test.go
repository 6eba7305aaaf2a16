package gateway

import (
	"slices"
	"testing"
	"time"

	"switchyard/catalog"
)

// TestGoneDeploymentsSweep: a deployment deleted from the catalog has its
// series dropped once it has been gone at every sweep for grace (a request
// that attempted it before the deletion may still count until then), once;
// one that comes back before is kept.
func TestGoneDeploymentsSweep(t *testing.T) {
	dep := func(ids ...string) map[string]*catalog.Deployment {
		m := map[string]*catalog.Deployment{}
		for _, id := range ids {
			m[id] = &catalog.Deployment{}
		}
		return m
	}
	t0 := time.Unix(1_800_000_000, 0)
	const grace = 10 * time.Minute
	var g goneDeployments
	steps := []struct {
		at   time.Duration
		cur  map[string]*catalog.Deployment
		drop []string
	}{
		{0, dep("a", "b", "c"), nil},
		{time.Minute, dep("a", "c"), nil},           // b gone: its wait starts
		{5 * time.Minute, dep("a"), nil},            // c gone too
		{8 * time.Minute, dep("a", "c"), nil},       // c back
		{11 * time.Minute, dep("a"), []string{"b"}}, // b gone for grace; c gone again, its wait restarts
		{12 * time.Minute, dep("a"), nil},           // b not twice
		{21 * time.Minute, dep("a"), []string{"c"}}, // c gone since 11m
		{40 * time.Minute, dep("a"), nil},
	}
	for _, s := range steps {
		got := g.sweep(t0.Add(s.at), s.cur, grace)
		slices.Sort(got)
		if !slices.Equal(got, s.drop) {
			t.Fatalf("at %v: dropped %v, want %v", s.at, got, s.drop)
		}
	}
}
