package cache

import (
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"
)

func key(i int) Key {
	var k Key
	k[0], k[1], k[2] = byte(i), byte(i>>8), byte(i>>16)
	return k
}

func TestLocalLRUByBytes(t *testing.T) {
	val := make([]byte, 100)
	per := int64(100 + len("t") + len("m") + itemOverhead)
	l := NewLocal(3 * per)
	for i := range 3 {
		if !l.Put(key(i), val, "t", "m", t0, time.Hour) {
			t.Fatal("put refused")
		}
	}
	l.Get(key(0), t0) // 0 is now the most recently used; 1 the least
	l.Put(key(3), val, "t", "m", t0, time.Hour)
	if _, ok := l.Get(key(1), t0); ok {
		t.Fatal("the least recently used entry survived")
	}
	for _, i := range []int{0, 2, 3} {
		if _, ok := l.Get(key(i), t0); !ok {
			t.Fatalf("entry %d evicted", i)
		}
	}
	if s := l.Stats(); s.Entries != 3 || s.Bytes != 3*per || s.Hits != 4 || s.Misses != 1 {
		t.Fatalf("stats %+v", s)
	}
	// one large entry evicts as many as it needs
	if !l.Put(key(9), make([]byte, 250), "t", "m", t0, time.Hour) {
		t.Fatal("put refused")
	}
	if s := l.Stats(); s.Bytes > 3*per {
		t.Fatalf("over the bound: %+v", s)
	}
	if l.Put(key(10), make([]byte, 3*per), "t", "m", t0, time.Hour) {
		t.Fatal("an entry larger than the cache was stored")
	}
}

func TestLocalTTL(t *testing.T) {
	l := NewLocal(1 << 20)
	l.Put(key(1), []byte("a"), "t", "m", t0, time.Minute)
	if _, ok := l.Get(key(1), t0.Add(time.Minute-1)); !ok {
		t.Fatal("expired early")
	}
	if _, ok := l.Get(key(1), t0.Add(time.Minute)); ok {
		t.Fatal("served after its TTL")
	}
	if s := l.Stats(); s.Entries != 0 || s.Bytes != 0 {
		t.Fatalf("expired entry kept: %+v", s)
	}
	if l.Put(key(2), []byte("a"), "t", "m", t0, 0) {
		t.Fatal("stored with no TTL")
	}
}

func TestLocalReplaceAndPurge(t *testing.T) {
	l := NewLocal(1 << 20)
	l.Put(key(1), []byte("a"), "t1", "m1", t0, time.Hour)
	l.Put(key(1), []byte("bb"), "t1", "m1", t0, time.Hour)
	if v, _ := l.Get(key(1), t0); string(v) != "bb" {
		t.Fatalf("got %q", v)
	}
	if s := l.Stats(); s.Entries != 1 || s.Bytes != int64(2+4+itemOverhead) {
		t.Fatalf("replace miscounted: %+v", s)
	}
	l.Put(key(2), []byte("a"), "t1", "m2", t0, time.Hour)
	l.Put(key(3), []byte("a"), "t2", "m1", t0, time.Hour)
	if n := l.Purge("t1", "m2"); n != 1 {
		t.Fatalf("purged %d", n)
	}
	if n := l.Purge("t1", ""); n != 1 {
		t.Fatalf("purged %d", n)
	}
	if n := l.Purge("", ""); n != 1 {
		t.Fatalf("purged %d", n)
	}
	l.Put(key(4), []byte("a"), "t", "m", t0, time.Hour)
	l.Delete(key(4))
	if s := l.Stats(); s.Entries != 0 || s.Bytes != 0 {
		t.Fatalf("left %+v", s)
	}
}

// TestLocalHostileKeySpace: a million distinct prompts keep the cache
// within max_local_bytes.
func TestLocalHostileKeySpace(t *testing.T) {
	if testing.Short() {
		t.Skip("a million puts")
	}
	const max = 1 << 20
	l := NewLocal(max)
	rng := rand.New(rand.NewPCG(1, 2))
	val := make([]byte, 64)
	var k Key
	for range 1_000_000 {
		for j := 0; j < len(k); j += 8 {
			v := rng.Uint64()
			for b := range 8 {
				k[j+b] = byte(v >> (8 * b))
			}
		}
		l.Put(k, val, "t", "m", t0, time.Hour)
	}
	if s := l.Stats(); s.Bytes > max || s.Entries != max/int64(64+2+itemOverhead) {
		t.Fatalf("stats %+v", s)
	}
}

func TestLocalConcurrent(t *testing.T) {
	l := NewLocal(64 << 10)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				k := key((i * (g + 1)) % 500)
				if i%3 == 0 {
					l.Put(k, make([]byte, 100), "t", "m", t0, time.Hour)
				} else {
					l.Get(k, t0)
				}
				if i%500 == 0 {
					l.Purge("t", "")
				}
			}
		}()
	}
	wg.Wait()
	if s := l.Stats(); s.Bytes > 64<<10 {
		t.Fatalf("over the bound: %+v", s)
	}
}

// TestLocalMemory: what the cache counts is what the heap holds: filled
// with small entries far past its bound, its heap stays within
// max_local_bytes plus a small constant (SPEC 18's hostile case).
func TestLocalMemory(t *testing.T) {
	const max = 16 << 20
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	l := NewLocal(max)
	var k Key
	for i := range 400_000 {
		k[0], k[1], k[2], k[3] = byte(i), byte(i>>8), byte(i>>16), byte(i>>24)
		l.Put(k, make([]byte, 64), "team", "model", t0, time.Hour)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	heap := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	if s := l.Stats(); s.Bytes > max || heap > max+2<<20 {
		t.Fatalf("counted %d bytes in %d entries, heap grew %d (bound %d)", s.Bytes, s.Entries, heap, max)
	}
	runtime.KeepAlive(l)
}

// TestLocalKeep: Keep stores a key it does not hold, marks a key that holds
// the same bytes as the most recently used (so it outlives others),
// replaces different bytes (a newer entry) and a key whose entry expired.
func TestLocalKeep(t *testing.T) {
	per := int64(1 + len("t") + len("m") + itemOverhead)
	l := NewLocal(2 * per)
	if !l.Keep(key(0), []byte("a"), "t", "m", t0, time.Minute) || !l.Put(key(1), []byte("b"), "t", "m", t0, time.Minute) {
		t.Fatal("refused")
	}
	l.Keep(key(0), []byte("a"), "t", "m", t0, time.Minute) // the same bytes: 0 most recent, 1 least
	l.Put(key(2), []byte("c"), "t", "m", t0, time.Minute)
	if _, ok := l.Get(key(1), t0); ok {
		t.Fatal("Keep did not mark its key as recently used: 1 survived, 0 should have")
	}
	if v, ok := l.Get(key(0), t0); !ok || string(v) != "a" {
		t.Fatalf("key 0 after Keep of the same bytes: %q %v", v, ok)
	}
	if !l.Keep(key(0), []byte("x"), "t", "m", t0, time.Minute) {
		t.Fatal("Keep of newer bytes refused")
	}
	if v, _ := l.Get(key(0), t0); string(v) != "x" {
		t.Fatalf("Keep kept older bytes under a key: %q, want the newer", v)
	}
	later := t0.Add(2 * time.Minute)
	if !l.Keep(key(0), []byte("y"), "t", "m", later, time.Minute) {
		t.Fatal("Keep of an expired key refused")
	}
	if v, ok := l.Get(key(0), later); !ok || string(v) != "y" {
		t.Fatalf("Keep of an expired key: %q %v, want the new bytes", v, ok)
	}
}
