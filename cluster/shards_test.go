package cluster

import (
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// threeShards is a slot map of three masters with a replica each, split
// like redis-cli --cluster create does.
func threeShards() []redis.ClusterSlot {
	n := func(port string) redis.ClusterNode { return redis.ClusterNode{Addr: "10.0.0.1:" + port} }
	return []redis.ClusterSlot{
		{Start: 0, End: 5460, Nodes: []redis.ClusterNode{n("7000"), n("7003")}},
		{Start: 5461, End: 10922, Nodes: []redis.ClusterNode{n("7001"), n("7004")}},
		{Start: 10923, End: 16383, Nodes: []redis.ClusterNode{n("7002"), n("7005")}},
	}
}

// keyIn returns a team key whose slot lies in [lo, hi].
func keyIn(t *testing.T, lo, hi int) string {
	t.Helper()
	for i := range 100000 {
		k := TeamKey("sy:", "t"+strconv.Itoa(i), "rpm")
		if s := Slot(k); s >= lo && s <= hi {
			return k
		}
	}
	t.Fatalf("no key in slots %d-%d", lo, hi)
	return ""
}

// newTestShards is a shardSet on a fake clock with a counting reload and
// the slot map of threeShards already loaded.
func newTestShards(t *testing.T) (*shardSet, *atomic.Int64, func(time.Duration)) {
	t.Helper()
	clk := newFakeClock()
	o := Options{Threshold: 3, Cool: time.Second, Clock: clk.Now}
	s := newShardSet([]string{"10.0.0.1:7000"}, &redis.Options{}, 50*time.Millisecond, o, o.newBreaker())
	var reloads atomic.Int64
	s.reload = func() { reloads.Add(1) }
	s.slots.Store(s.buildMap(threeShards()))
	s.refreshSummary()
	return s, &reloads, clk.Advance
}

// fail reports n counted failures to br as go-redis would.
func fail(br *Breaker, n int) {
	for range n {
		if br.Allow() == nil {
			br.ReportResult(errDown)
		}
	}
}

// TestShardBreakers: a key is guarded by its own shard's master; when that
// master fails only its keys go local, the failures ask for a reload at most
// once per ReloadEvery, the open breaker asks again while it is asked about,
// and a reloaded map naming the promoted replica makes the key shared again.
func TestShardBreakers(t *testing.T) {
	s, reloads, advance := newTestShards(t)
	a, b, c := keyIn(t, 0, 5460), keyIn(t, 5461, 10922), keyIn(t, 10923, 16383)
	for _, k := range []string{a, b, c} {
		if !s.available(k) {
			t.Fatalf("%s unavailable with every shard up", k)
		}
	}
	brA, brB := s.breakerFor(a), s.breakerFor(b)
	if brA == nil || brA == brB || brA == s.breakerFor(c) {
		t.Fatal("keys of different shards share a breaker")
	}
	if brA != s.node("10.0.0.1:7000").br {
		t.Fatal("key's breaker is not its master's")
	}
	if !s.summary.Up() {
		t.Fatal("summary down with every shard up")
	}

	fail(brA, 3) // master 7000 stops answering
	if s.available(a) {
		t.Fatal("key of the failed shard still available")
	}
	if !s.available(b) || !s.available(c) {
		t.Fatal("keys of healthy shards went local")
	}
	if s.summary.Up() {
		t.Fatal("summary up with a shard down")
	}
	if got := reloads.Load(); got != 1 {
		t.Fatalf("%d reloads asked for by 3 failures within ReloadEvery, want 1", got)
	}
	for range 100 {
		_ = s.available(a)
	}
	if got := reloads.Load(); got != 1 {
		t.Fatalf("%d reloads within ReloadEvery, want 1 (rate-limited)", got)
	}
	advance(ReloadEvery)
	_ = s.available(a)
	if got := reloads.Load(); got != 2 {
		t.Fatalf("%d reloads after ReloadEvery, want 2", got)
	}

	// The replica 7003 is promoted; the next load names it.
	promoted := threeShards()
	promoted[0].Nodes = []redis.ClusterNode{{Addr: "10.0.0.1:7003"}}
	s.slots.Store(s.buildMap(promoted))
	s.refreshSummary()
	if !s.available(a) {
		t.Fatal("key not shared again after the promoted replica took over")
	}
	if s.breakerFor(a) != s.node("10.0.0.1:7003").br {
		t.Fatal("key's breaker is not the promoted replica's")
	}
	if !s.summary.Up() {
		t.Fatal("summary still down after the takeover")
	}
	if brB.Trips() != 0 || s.breakerFor(c).Trips() != 0 {
		t.Fatal("healthy shards' breakers tripped")
	}
}

// TestLostShardDoesNotFlap: with a shard's master and replica gone, its
// breaker's probe asks that node only, so it fails every cool period and the
// breaker stays open (one trip), while the other shards never trip. (The
// shared breaker it replaces probed the first live address, succeeded, and
// opened and closed 25 times in 10 s.)
func TestLostShardDoesNotFlap(t *testing.T) {
	s, _, advance := newTestShards(t)
	a, b := keyIn(t, 0, 5460), keyIn(t, 5461, 10922)
	brA := s.breakerFor(a)
	probes := make(chan struct{}, 100)
	brA.SetProbe(func() error { probes <- struct{}{}; return errDown })
	fail(brA, 3)
	for range 10 { // ten cool periods of requests on both shards
		advance(time.Second)
		_ = s.available(a)
		select {
		case <-probes:
		case <-time.After(5 * time.Second):
			t.Fatal("no probe after the cool period")
		}
		waitOpen(t, brA)
		if !s.available(b) {
			t.Fatal("healthy shard unavailable")
		}
	}
	if brA.Trips() != 1 || brA.Up() {
		t.Fatalf("lost shard's breaker: %d trips, up %v; want 1 trip, still open", brA.Trips(), brA.Up())
	}
	if s.breakerFor(b).Trips() != 0 {
		t.Fatal("healthy shard's breaker tripped")
	}
}

// waitOpen waits (bounded) for a failed probe to re-open br.
func waitOpen(t *testing.T, br *Breaker) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for br.state.Load() != stateOpen {
		if time.Now().After(deadline) {
			t.Fatal("failed probe did not re-open the breaker")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestNodeKey: CLUSTER SLOTS' loopback addresses and go-redis's rewritten
// ones name the same node.
func TestNodeKey(t *testing.T) {
	for _, tc := range [][2]string{
		{"127.0.0.1:7000", ":7000"},
		{"127.0.0.1:7000", "localhost:7000"},
		{"[::1]:7000", ":7000"},
	} {
		if nodeKey(tc[0]) != nodeKey(tc[1]) {
			t.Errorf("nodeKey(%q) != nodeKey(%q)", tc[0], tc[1])
		}
	}
	if nodeKey("10.0.0.1:7000") == nodeKey("10.0.0.2:7000") || nodeKey("10.0.0.1:7000") == nodeKey(":7000") {
		t.Error("different hosts share a key")
	}
}

// TestUnassignedSlot: a slot no master serves is unavailable and asks for a
// reload.
func TestUnassignedSlot(t *testing.T) {
	s, reloads, _ := newTestShards(t)
	partial := threeShards()[:2]
	s.slots.Store(s.buildMap(partial))
	if s.available(keyIn(t, 10923, 16383)) {
		t.Fatal("unassigned slot available")
	}
	if reloads.Load() != 1 {
		t.Fatal("unassigned slot did not ask for a reload")
	}
}

// FuzzBuildMap: a slot map built from any CLUSTER SLOTS reply (ranges out of
// order, overlapping, outside 0-16383, empty node lists, odd addresses)
// never panics, and every slot it assigns names a master of the reply.
func FuzzBuildMap(f *testing.F) {
	f.Add(0, 5460, "10.0.0.1:7000", 5461, 16383, ":7001")
	f.Add(-5, 99999, "127.0.0.1:1", 3, 2, "?:0")
	f.Add(16383, 16383, "[::1]:6379", 0, 0, "")
	f.Fuzz(func(t *testing.T, s1, e1 int, a1 string, s2, e2 int, a2 string) {
		s := newShardSet(nil, &redis.Options{}, time.Millisecond, Options{}, NewBreaker(0, 0, nil))
		reply := []redis.ClusterSlot{
			{Start: s1, End: min(e1, s1+20000), Nodes: []redis.ClusterNode{{Addr: a1}}},
			{Start: s2, End: min(e2, s2+20000), Nodes: []redis.ClusterNode{{Addr: a2}, {Addr: a1}}},
			{Start: 0, End: 10},
		}
		fillHosts(reply, a1)
		m := s.buildMap(reply)
		for slot, i := range m.owner {
			if int(i) > len(m.masters) {
				t.Fatalf("slot %d owned by master %d of %d", slot, i, len(m.masters))
			}
		}
		_ = nodeKey(a1)
	})
}
