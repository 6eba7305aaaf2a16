package cluster

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// TestHeartbeatLiveCountsEveryProcess: the live count the fallback of
// redis.expected_replicas: 0 divides by (SPEC 9) counts every process that
// beats, on Redis's clock: two replicas configured with one server.node_id
// are two nodes, a node whose clock is behind is not pruned by the others,
// a dead node whose clock was ahead leaves after three intervals, and a
// node that stops and starts again under its id is one node. Redis's clock
// and each node's clock are fake (a node's is Redis's plus its skew).
func TestHeartbeatLiveCountsEveryProcess(t *testing.T) {
	type node struct {
		id   string
		skew time.Duration
	}
	type step struct {
		adv  time.Duration // Redis's clock (and every node's) moves on by this first
		beat []int         // then these nodes beat, in order
		stop []int         // then these nodes beat a last time and stop (Run with ctx done)
	}
	for _, tc := range []struct {
		name  string
		nodes []node
		steps []step
		want  map[int]int // node -> Live() after the steps
	}{
		{"distinct ids", []node{{"a", 0}, {"b", 0}, {"c", 0}},
			[]step{{0, []int{0, 1, 2}, nil}, {time.Second, []int{0, 1, 2}, nil}}, map[int]int{0: 3, 1: 3, 2: 3}},
		{"one node_id on two replicas", []node{{"a", 0}, {"a", 0}, {"b", 0}},
			[]step{{0, []int{0, 1, 2}, nil}, {time.Second, []int{0, 1, 2}, nil}}, map[int]int{0: 3, 1: 3, 2: 3}},
		{"a node's clock 10 s behind", []node{{"a", -10 * time.Second}, {"b", 0}, {"c", 0}},
			[]step{{0, []int{0, 1, 2}, nil}, {time.Second, []int{0, 1, 2}, nil}}, map[int]int{0: 3, 1: 3, 2: 3}},
		{"a dead node's clock was 10 s ahead", []node{{"a", 10 * time.Second}, {"b", 0}},
			[]step{{0, []int{0, 1}, nil}, {7 * time.Second, []int{1}, nil}}, map[int]int{1: 1}},
		{"a node restarts under its id", []node{{"a", 0}, {"a", 0}, {"b", 0}},
			[]step{{0, []int{2}, []int{0}}, {time.Second, []int{1, 2}, nil}}, map[int]int{1: 2, 2: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := miniredis.RunT(t)
			c := redis.NewClient(&redis.Options{Addr: m.Addr(), MaxRetries: -1})
			defer c.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			redisNow := time.Date(2026, 12, 7, 4, 0, 0, 0, time.UTC)
			beats := make([]*Heartbeat, len(tc.nodes))
			for i, n := range tc.nodes {
				beats[i] = NewHeartbeat(c, "sy:", 2*time.Second, func() NodeInfo { return NodeInfo{Node: n.id} })
				beats[i].now = func() time.Time { return redisNow.Add(n.skew) }
				beats[i].log = slog.New(slog.DiscardHandler)
			}
			done, stop := context.WithCancel(ctx)
			stop()
			for _, s := range tc.steps {
				redisNow = redisNow.Add(s.adv)
				m.SetTime(redisNow)
				for _, i := range s.beat {
					beats[i].beat(ctx)
				}
				for _, i := range s.stop {
					beats[i].Run(done)
				}
			}
			for i, want := range tc.want {
				if got := beats[i].Live(); got != want {
					t.Errorf("node %d (%s): live %d, want %d", i, tc.nodes[i].id, got, want)
				}
			}
		})
	}
}

// TestHeartbeatSameNodeIDReported: two live processes announcing one
// server.node_id are reported by both (an error in the log when it starts,
// not at every beat, and the hook the node counts in a metric at every
// beat that sees it); a node with an id of its own reports nothing.
func TestHeartbeatSameNodeIDReported(t *testing.T) {
	m := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: m.Addr(), MaxRetries: -1})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var logs [3]bytes.Buffer
	seen := [3]int{}
	beats := make([]*Heartbeat, 3)
	for i, id := range []string{"a", "a", "b"} {
		beats[i] = NewHeartbeat(c, "sy:", 2*time.Second, func() NodeInfo { return NodeInfo{Node: id} })
		beats[i].log = slog.New(slog.NewTextHandler(&logs[i], nil))
		beats[i].OnCollision(func(node string, others int) {
			if node != id || others != 1 {
				t.Errorf("collision reported as %q with %d others, want %q with 1", node, others, id)
			}
			seen[i]++
		})
	}
	for range 3 {
		for _, h := range beats {
			h.beat(ctx)
		}
	}
	// the first "a" saw the second from its second beat on
	if want := [3]int{2, 3, 0}; seen != want {
		t.Fatalf("collisions reported %v, want %v", seen, want)
	}
	for i, want := range []int{1, 1, 0} {
		if got := strings.Count(logs[i].String(), "level=ERROR"); got != want || (want == 1 && !strings.Contains(logs[i].String(), "node_id")) {
			t.Errorf("node %d logged %d errors, want %d naming node_id: %s", i, got, want, logs[i].String())
		}
	}
	nodes, err := beats[2].Nodes(ctx)
	if err != nil || len(nodes) != 2 {
		t.Fatalf("Nodes = %+v, %v; want a and b once each", nodes, err)
	}
}
