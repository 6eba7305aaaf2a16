package ratelimit

import (
	"context"
	"strconv"
	"testing"
	"time"

	"switchyard/internal/heaptest"
	"switchyard/internal/teamtest"
)

// TestBlockedLevelsCompact: when Redis refuses an end user for budget
// (SPEC 3.1), the shared limiter tells the fallback (BlockBudget), which
// keeps refusing that user until the period resets, up to 720 h, also
// through a Redis outage (SPEC 9). That block made a full level record
// (about 210 bytes with its key) that no sweep dropped until the block
// ended: 100,000 end users over budget cost 21 MB for the whole period,
// a million 210 MB. A blocked level at rest is now kept compact, like its
// spend (restStore), and still refused until its block ends.
func TestBlockedLevelsCompact(t *testing.T) {
	const n = 20_000
	const maxBytesPerLevel = 96
	clk := newFakeClock()
	team := teamtest.Team("acme", teamtest.Limits{})
	lim := teamtest.Level(teamtest.Limits{USD: 10})
	until := clk.Now().Add(100 * time.Hour).UnixNano()
	key := func(i int) string { return levelKey("acme", "user-"+strconv.Itoa(i)) }
	l := NewLocal(clk.Now, 1)
	l.sweepAt.Store(1 << 40) // sweeps run here, by hand
	l.restAt.Store(1 << 40)
	_, bytes := heaptest.Retained(func() any {
		for i := range n {
			l.BlockBudget(key(i), true, until, 0) // each key made as the edge makes it, per request
		}
		l.sweep()
		return l
	})
	per := float64(bytes) / n
	t.Logf("%.1f heap bytes per level blocked for budget", per)
	if per > maxBytesPerLevel {
		t.Errorf("%.1f heap bytes per level blocked for budget, want <= %d", per, maxBytesPerLevel)
	}
	admit := func(key string) bool {
		d, err := l.Admit(context.Background(), Admission{RequestID: "r", Team: team, CostUSD: 0.01,
			Levels: [2]Level{{Key: key, Limits: lim}}})
		if err != nil {
			t.Fatal(err)
		}
		return d.Allowed
	}
	for _, tc := range []struct {
		name    string
		advance time.Duration
		key     string
		want    bool
	}{
		{"blocked level refused", 0, key(0), false},
		{"another blocked level refused", time.Hour, key(n - 1), false},
		{"a level never blocked admitted", 0, levelKey("acme", "other"), true},
		{"still refused after a sweep", 0, key(1), false},
		{"admitted once the block ended", 100 * time.Hour, key(2), true},
	} {
		clk.Advance(tc.advance)
		if tc.name == "still refused after a sweep" {
			l.sweep()
		}
		if got := admit(tc.key); got != tc.want {
			t.Errorf("%s: admitted %v, want %v", tc.name, got, tc.want)
		}
	}
}
