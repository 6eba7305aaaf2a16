package floor

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// TestMiss walks the miss floor's script through a miss (the lease taken),
// a second request during it (the lease found: no entry), and a hit once
// the entry is written; without the lease it only reads.
func TestMiss(t *testing.T) {
	mr := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	ctx := context.Background()
	key := EntryKey("ab")
	keys := append(append([]string(nil), GCRAKeys...), key)
	run := func(lease string) any {
		t.Helper()
		v, err := Miss.Run(ctx, c, keys, append(GCRAArgs, "!lease", 30000, lease)...).Result()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if v := run("1"); v != int64(1) {
		t.Fatalf("miss: got %v, want 1", v)
	}
	if v, _ := mr.Get(key); v != "!lease" {
		t.Fatalf("lease: the entry key holds %q, want the lease", v)
	}
	if v := run("1"); v != int64(1) {
		t.Fatalf("during the lease: got %v, want 1", v)
	}
	if err := c.Set(ctx, key, `{"a":1}`, time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	for _, lease := range []string{"1", "0"} {
		if v := run(lease); v != `{"a":1}` {
			t.Fatalf("hit (lease %s): got %v", lease, v)
		}
	}
	mr.Del(key)
	if v := run("0"); v != int64(1) || mr.Exists(key) {
		t.Fatalf("without the lease: got %v, key made %v; want 1 and nothing written", v, mr.Exists(key))
	}
}
