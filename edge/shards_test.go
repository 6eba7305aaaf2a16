package edge

import (
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"switchyard/internal/teamtest"
)

// shardHealth is a Health with a per-key answer, as cluster.Conn gives on
// Redis Cluster: keys under a down team's hash tag are unavailable.
type shardHealth struct{ downTeam string }

func (h shardHealth) Up() bool { return h.downTeam == "" }
func (h shardHealth) Available(key string) bool {
	return h.downTeam == "" || !strings.Contains(key, "{team:"+h.downTeam+"}")
}

// TestPerShardFallback: with one shard down only the teams on it go local;
// a team on a healthy shard stays shared (its admission reaches Redis), where
// one shared breaker sent every team local (issue 16).
func TestPerShardFallback(t *testing.T) {
	m := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: m.Addr(), MaxRetries: -1})
	defer c.Close()
	obs := &countObs{}
	r := newRedis(c, shardHealth{downTeam: "lost"}, Config{Prefix: "sy:", Divisor: 1, Clock: newFakeClock().Now}, nil, nil, nil, obs)
	lost, fine := teamtest.Team("lost", teamtest.Limits{RPM: 10}), teamtest.Team("fine", teamtest.Limits{RPM: 10})
	if !begin(t, r, fine, 0).Decision.Allowed || !begin(t, r, lost, 0).Decision.Allowed {
		t.Fatal("refused under the limit")
	}
	if !m.Exists("sy:{team:fine}:tat") {
		t.Fatal("team on a healthy shard was not admitted in Redis")
	}
	if m.Exists("sy:{team:lost}:tat") {
		t.Fatal("team on the down shard reached Redis")
	}
	if obs.fallbacks.Load() != 1 {
		t.Fatalf("%d fallbacks, want 1 (the down shard's team only)", obs.fallbacks.Load())
	}
}

// TestSetDivisor: the local fallback divides by the divisor the node last
// set (redis.expected_replicas 0: the live node count of the heartbeats).
func TestSetDivisor(t *testing.T) {
	g := newMiniRig(t, Config{}, false)
	g.r.SetDivisor(3)
	g.up.down.Store(true)
	team := teamtest.Team("d", teamtest.Limits{RPM: 30})
	admitted := 0
	for range 30 {
		if begin(t, g.r, team, 0).Decision.Allowed {
			admitted++
		}
	}
	if admitted != 10 {
		t.Fatalf("local fallback admitted %d of rpm 30 with 3 live nodes, want 10", admitted)
	}
}
