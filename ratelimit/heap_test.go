package ratelimit

import (
	"strconv"
	"testing"

	"switchyard/internal/heaptest"
)

// TestLevelStateObjects: a key or user level's state is one object for
// the collector, its map entry none of its own (a sync.Map made about one
// more per level: with 100,000 keys and 100,000 end users, 200,000 objects
// marked on every cycle).
func TestLevelStateObjects(t *testing.T) {
	const n = 20_000
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "team|k|" + strconv.Itoa(i)
	}
	l := NewLocal(nil, 1)
	l.sweepAt.Store(1 << 40) // no sweep while counting
	objs, _ := heaptest.Retained(func() any {
		for _, k := range keys {
			l.sub(k)
		}
		return l
	})
	per := float64(objs) / n
	t.Logf("%.2f heap objects per level", per)
	if per > 1.2 {
		t.Fatalf("%.2f heap objects per level, want <= 1.2", per)
	}
}
