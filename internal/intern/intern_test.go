package intern

import (
	"fmt"
	"sync"
	"testing"
)

// TestTable: a string keeps its index, indexes read back their strings, and
// a full table refuses new strings but still answers known ones.
func TestTable(t *testing.T) {
	tb := New(3)
	for i, v := range []string{"a", "b", "a", "c", "b"} {
		id, ok := tb.ID(v)
		if !ok || tb.Value(id) != v {
			t.Fatalf("step %d: %q got id %d ok %v, reads %q", i, v, id, ok, tb.Value(id))
		}
	}
	if _, ok := tb.ID("d"); ok || tb.Len() != 3 {
		t.Fatalf("a fourth string in a table of 3: ok %v len %d", ok, tb.Len())
	}
	if id, ok := tb.ID("c"); !ok || tb.Value(id) != "c" {
		t.Fatal("a known string refused once the table is full")
	}
}

// TestTableConcurrent: concurrent IDs of the same strings agree.
func TestTableConcurrent(t *testing.T) {
	tb := New(100)
	var wg sync.WaitGroup
	ids := make([][]uint32, 4)
	for g := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				id, _ := tb.ID(fmt.Sprint("v", i))
				ids[g] = append(ids[g], id)
			}
		}()
	}
	wg.Wait()
	for g := range ids {
		for i, id := range ids[g] {
			if id != ids[0][i] || tb.Value(id) != fmt.Sprint("v", i) {
				t.Fatalf("goroutine %d, string %d: id %d, want %d", g, i, id, ids[0][i])
			}
		}
	}
}
