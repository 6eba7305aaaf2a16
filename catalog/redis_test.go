package catalog

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// mgetCounter counts the reads of the whole state.
type mgetCounter struct {
	*redis.Client
	mgets atomic.Int64
}

func (m *mgetCounter) MGet(ctx context.Context, keys ...string) *redis.SliceCmd {
	m.mgets.Add(1)
	return m.Client.MGet(ctx, keys...)
}

// TestPollReadsTheStateOnlyWhenNewer: the watcher's poll asks for the
// version; the state (megabytes with thousands of teams) is read and
// decoded only when the stored version is past the replica's own.
func TestPollReadsTheStateOnlyWhenNewer(t *testing.T) {
	m := miniredis.RunT(t)
	c := &mgetCounter{Client: redis.NewClient(&redis.Options{Addr: m.Addr()})}
	defer c.Close()
	ctx := context.Background()
	s := NewRedisStore(c, "sy:", 200*time.Millisecond)
	if st, ok, err := s.loadNewer(ctx, 0); err != nil || ok || st != nil {
		t.Fatalf("empty store: %v %v %v", st, ok, err)
	}
	if err := s.Save(ctx, 0, &State{Version: 3, Schema: 1}); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.loadNewer(ctx, 3); err != nil || ok {
		t.Fatalf("same version: ok=%v err=%v", ok, err)
	}
	if n := c.mgets.Load(); n != 0 {
		t.Fatalf("%d reads of the state while the version was unchanged", n)
	}
	st, ok, err := s.loadNewer(ctx, 2)
	if err != nil || !ok || st.Version != 3 {
		t.Fatalf("newer version: %+v ok=%v err=%v", st, ok, err)
	}
	if n := c.mgets.Load(); n != 1 {
		t.Fatalf("%d reads of the state for one newer version, want 1", n)
	}
	m.Close()
	if _, _, err := s.loadNewer(ctx, 2); err == nil {
		t.Fatal("Redis gone: no error")
	}
}
