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
