// Package heaptest measures what code leaves on the heap, for the tests
// that bound a node's memory per team, key or end user (SPEC 16: cost
// stays flat): the bytes and the objects, which the garbage collector
// marks on every cycle.
package heaptest

import (
	"runtime"
	"testing"
)

// Retained runs f between two full collections and returns the heap
// objects and bytes live afterwards that were not live before: what f
// built and kept reachable through the value it returns (held until the
// second reading).
func Retained(f func() any) (objects, bytes int64) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	kept := f()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(kept)
	return int64(after.HeapObjects) - int64(before.HeapObjects), int64(after.HeapAlloc) - int64(before.HeapAlloc)
}

// Collect runs full collections for b while kept is live: what holding
// kept adds to every cycle of the collector (run it with kept nil for the
// collection without it).
func Collect(b *testing.B, kept any) {
	for b.Loop() {
		runtime.GC()
	}
	runtime.KeepAlive(kept)
}
