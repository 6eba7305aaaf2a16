package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// TestHeartbeatLive: each beat counts the nodes seen within three intervals
// and keeps the count in memory, so the fallback divisor of
// expected_replicas: 0 is the live node count even while Redis is gone.
func TestHeartbeatLive(t *testing.T) {
	m := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: m.Addr(), MaxRetries: -1, DialTimeout: 50 * time.Millisecond})
	defer c.Close()
	ctx := context.Background()
	beats := map[string]*Heartbeat{}
	for _, n := range []string{"a", "b", "c"} {
		beats[n] = NewHeartbeat(c, "sy:", 2*time.Second, func() NodeInfo { return NodeInfo{Node: n} })
	}
	a := beats["a"]
	if a.Live() != 0 || a.Divisor(0) != 1 {
		t.Fatalf("before any beat: live %d, divisor %d; want 0, 1", a.Live(), a.Divisor(0))
	}
	a.beat(ctx)
	if a.Live() != 1 {
		t.Fatalf("alone: live %d, want 1", a.Live())
	}
	beats["b"].beat(ctx)
	beats["c"].beat(ctx)
	// A node last seen a minute ago is dead, not live.
	if err := c.ZAdd(ctx, "sy:{nodes}:seen", redis.Z{Score: float64(time.Now().Add(-time.Minute).Unix()), Member: "gone"}).Err(); err != nil {
		t.Fatal(err)
	}
	a.beat(ctx)
	if a.Live() != 3 || a.Divisor(0) != 3 {
		t.Fatalf("three live nodes and a dead one: live %d, divisor %d; want 3, 3", a.Live(), a.Divisor(0))
	}
	if a.Divisor(5) != 5 {
		t.Fatal("a configured expected_replicas is not kept")
	}
	nodes, err := a.Nodes(ctx)
	if err != nil || len(nodes) != 3 {
		t.Fatalf("Nodes = %d, %v; want the 3 live ones", len(nodes), err)
	}
	m.Close() // Redis gone: the last count stays
	a.beat(ctx)
	if a.Live() != 3 {
		t.Fatalf("Redis down: live %d, want the last count 3", a.Live())
	}
	var none *Heartbeat
	if none.Divisor(0) != 1 {
		t.Fatal("no heartbeat (local-only): divisor must be 1")
	}
}
