package cache

import (
	"testing"
	"time"
)

// BenchmarkLocalPut stores a new entry each time into a store large enough
// to keep them all (a cacheable miss on a node filling its cache).
func BenchmarkLocalPut(b *testing.B) {
	l := NewLocal(1 << 30)
	val := entries["text"].Encode(nil)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		l.Put(key(i), val, "team", "model", t0, time.Hour)
		i++
	}
}
