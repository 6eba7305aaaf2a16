package catalog

import (
	"math"
	"testing"

	"switchyard/config"
)

// TestUsageCost: SPEC 10.2's formula, cached and cache-write input at their
// own prices (default: the input price).
func TestUsageCost(t *testing.T) {
	cp, wp := 0.25, 1.25
	d := &Deployment{Deployment: config.Deployment{Price: config.Price{Input: 1, Output: 2, CachedInput: &cp, CacheWrite: &wp}}}
	for _, tc := range []struct {
		in, cached, write, out int
		want                   float64
	}{
		{1000, 800, 0, 20, (200*1 + 800*0.25 + 20*2) / 1e6},
		{1000, 0, 100, 0, (900*1 + 100*1.25) / 1e6},
		{1000, 0, 0, 10, d.ExpectedCost(1000, 10)},
		{10, 50, 0, 1, d.ExpectedCost(10, 1)}, // inconsistent counts: no discount
		{10, -5, 0, 1, d.ExpectedCost(10, 1)},
	} {
		if got := d.Cost(tc.in, tc.cached, tc.write, tc.out); math.Abs(got-tc.want) > 1e-15 {
			t.Errorf("%+v: %v, want %v", tc, got, tc.want)
		}
	}
	plain := &Deployment{Deployment: config.Deployment{Price: config.Price{Input: 1, Output: 2}}}
	if got, want := plain.Cost(1000, 800, 100, 20), plain.ExpectedCost(1000, 20); math.Abs(got-want) > 1e-15 {
		t.Errorf("default cached price: %v, want %v", got, want)
	}
}

// TestCostBoundCountsCacheWrites: the budget's reservation is the highest
// cost an answer can reach, and a prompt written to the cache at a
// cache_write price above input costs more than one read at input.
func TestCostBoundCountsCacheWrites(t *testing.T) {
	wp := 3.75
	d := &Deployment{Deployment: config.Deployment{ID: "d", Model: "m", Price: config.Price{Input: 3, Output: 15, CacheWrite: &wp}}}
	s := &Snapshot{Models: map[string]*Model{"m": {Name: "m", Pool: []*Deployment{d}}}}
	want := (1000*3.75 + 100*15) / 1e6
	if got := s.CostBound("m", 1000, 100); math.Abs(got-want) > 1e-15 {
		t.Fatalf("bound %v, want %v", got, want)
	}
	if got := d.Cost(1000, 0, 1000, 100); got > s.CostBound("m", 1000, 100)+1e-15 {
		t.Fatalf("an answer (%v) cost more than its bound", got)
	}
}
