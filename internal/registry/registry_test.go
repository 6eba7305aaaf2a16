package registry

import (
	"slices"
	"sync"
	"testing"
	"unsafe"
)

func TestMap(t *testing.T) {
	var g Map[*int]
	a, b := new(int), new(int)
	if _, ok := g.Load("x"); ok {
		t.Fatal("an empty map found a record")
	}
	if got, loaded := g.LoadOrStore("x", a); got != a || loaded {
		t.Fatal("LoadOrStore did not store into an empty map")
	}
	if got, loaded := g.LoadOrStore("x", b); got != a || !loaded {
		t.Fatal("LoadOrStore replaced a record")
	}
	if g.CompareAndDelete("x", b) {
		t.Fatal("CompareAndDelete removed another record")
	}
	g.LoadOrStore("y", b)
	var names []string
	g.Range(func(name string, v *int) {
		names = append(names, name)
		g.Delete(name) // a callback may change the map
	})
	slices.Sort(names)
	if !slices.Equal(names, []string{"x", "y"}) || g.Len() != 0 {
		t.Fatalf("Range saw %v and left %d records", names, g.Len())
	}
	g.LoadOrStore("x", a)
	if !g.CompareAndDelete("x", a) || g.Len() != 0 {
		t.Fatal("CompareAndDelete kept its record")
	}
}

// TestMapConcurrent: concurrent LoadOrStore of one name agree on one
// record (run with -race).
func TestMapConcurrent(t *testing.T) {
	var g Map[*int]
	var wg sync.WaitGroup
	got := make([]*int, 8)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], _ = g.LoadOrStore("team", new(int))
			g.Range(func(string, *int) {})
		}()
	}
	wg.Wait()
	for _, p := range got {
		if p != got[0] {
			t.Fatal("two records stored for one name")
		}
	}
}

// TestMapShardPadding: two shards' locks are at least a cache line apart,
// so they never share one.
func TestMapShardPadding(t *testing.T) {
	var g Map[*int]
	if d := uintptr(unsafe.Pointer(&g.s[1].mu)) - uintptr(unsafe.Pointer(&g.s[0].mu)); d < 64 {
		t.Fatalf("two shards' locks are %d bytes apart, want at least 64", d)
	}
}
