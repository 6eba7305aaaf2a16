package routing

import (
	"fmt"
	"testing"
)

// TestWarmCache: a put is read back within ttl and not after; a session's
// later put replaces its deployment; a full shard evicts instead of growing;
// a deployment id past the intern bound is not recorded.
func TestWarmCache(t *testing.T) {
	w := newWarmCache(16 * 8)
	w.put("s1", "d1", 100, 10)
	if id, at := w.get("s1", 110, 10); id != "d1" || at != 100 {
		t.Fatalf("within ttl: %q %d", id, at)
	}
	if id, _ := w.get("s1", 111, 10); id != "" {
		t.Fatalf("past ttl: %q", id)
	}
	w.put("s1", "d2", 200, 10)
	if id, _ := w.get("s1", 200, 10); id != "d2" {
		t.Fatalf("after a second put: %q", id)
	}
	if id, _ := w.get("s2", 200, 10); id != "" {
		t.Fatalf("a session never put: %q", id)
	}
	for i := range 10_000 {
		w.put(fmt.Sprint("s", i), "d1", 300, 10)
	}
	n := 0
	for i := range w.shards {
		n += len(w.shards[i].m)
	}
	if n > 16*8 {
		t.Fatalf("%d entries held, bound %d", n, 16*8)
	}
	for i := w.ids.Len(); i < maxWarmDeployments; i++ {
		w.ids.ID(fmt.Sprint("dep-", i))
	}
	w.put("s-new", "one-too-many", 400, 10)
	if id, _ := w.get("s-new", 400, 10); id != "" {
		t.Fatalf("a deployment past the intern bound was recorded: %q", id)
	}
}
