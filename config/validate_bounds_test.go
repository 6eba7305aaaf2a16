package config

import (
	"strings"
	"testing"
)

// TestValidationUpperBounds: a size the node allocates in full at start
// has an upper bound, so a typo (an extra zero or three) is a validation
// problem naming the field and the fix, not a node that dies allocating
// (SPEC 13, 14): audit.max_entries is the ring's record array and the
// audit writer's queue, made whole at start; redis.pool_size is the
// connections Warm opens and holds at once on every Redis node.
func TestValidationUpperBounds(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, want string // want "": accepted
	}{
		{"audit.max_entries huge", minimal + "audit: {max_entries: 1000000000}\n", "audit.max_entries: at most 100000"},
		{"audit.max_entries at the bound", minimal + "audit: {max_entries: 100000}\n", ""},
		{"redis.pool_size huge", minimal + "redis: {url: 'redis://localhost:6379', pool_size: 1000000}\n", "redis.pool_size: at most 4096"},
		{"redis.pool_size at the bound", minimal + "redis: {url: 'redis://localhost:6379', pool_size: 4096}\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load([]byte(tc.yaml), nil)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("want it accepted, got:\n%v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("want a problem mentioning %q, got:\n%v", tc.want, err)
			}
		})
	}
}
