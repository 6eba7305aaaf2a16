package redistest

import (
	"context"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// NodeTimeout is cluster-node-timeout of a test Cluster: how long a node may
// be silent before the others mark it failed and promote its replica. Redis's
// default is 15 s; two seconds keep a failover test short while nodes on a
// loaded two-core machine (tests under -race) do not mark each other failed.
const NodeTimeout = 2 * time.Second

// Cluster is a real Redis Cluster of masters with one replica each, every
// node a redis-server child on free loopback ports. Nodes run with
// cluster-require-full-coverage no, as Switchyard's deployment advises: a
// lost shard then stops only its own slots (with the default "yes" the
// whole cluster answers CLUSTERDOWN and every team falls back).
type Cluster struct {
	t     testing.TB
	Nodes []*Server // masters first as created; roles change with failovers
}

// StartCluster starts masters masters with one replica each, creates the
// cluster with redis-cli --cluster create and waits (bounded) until every
// node reports cluster_state:ok and every master has its replica. It skips
// t when redis-server or redis-cli is not installed. The nodes are killed
// when the test ends.
func StartCluster(t testing.TB, masters int) *Cluster {
	t.Helper()
	if _, err := exec.LookPath("redis-cli"); err != nil {
		t.Skip("redis-cli not installed: skipping the Redis Cluster test (apt-get install redis-server; .ci/run installs it)")
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server not installed: skipping the Redis Cluster test (apt-get install redis-server; .ci/run installs it)")
	}
	c := &Cluster{t: t}
	dir := t.TempDir()
	args := []string{"create"}
	for range 2 * masters {
		port := freePort(t, true)
		s := &Server{t: t, port: port, extra: []string{
			"--cluster-enabled", "yes",
			"--cluster-config-file", dir + "/nodes-" + strconv.Itoa(port) + ".conf",
			"--dir", dir,
			"--cluster-node-timeout", strconv.Itoa(int(NodeTimeout / time.Millisecond)),
			"--cluster-require-full-coverage", "no",
			"--cluster-replica-validity-factor", "0", // a replica always may take over, however long the master was gone
		}}
		s.Restart()
		t.Cleanup(s.Kill)
		c.Nodes = append(c.Nodes, s)
		args = append(args, s.Addr())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	args = append([]string{"--cluster"}, append(args, "--cluster-replicas", "1", "--cluster-yes")...)
	if out, err := exec.CommandContext(ctx, "redis-cli", args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	c.waitFor(20*time.Second, "every node to report cluster_state:ok with all replicas attached", func() bool {
		for _, s := range c.Nodes {
			info, err := s.admin().ClusterInfo(ctx).Result()
			if err != nil || !strings.Contains(info, "cluster_state:ok") {
				return false
			}
		}
		return c.agreed(masters)
	})
	return c
}

// Addrs are every node's host:port (the seeds a client is configured with).
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.Nodes))
	for i, s := range c.Nodes {
		out[i] = s.Addr()
	}
	return out
}

// Shard is one master and its replicas as a live node sees them.
type Shard struct {
	Master   string
	Replicas []string
	Start    int // first slot of the shard's first range
}

// slots is CLUSTER SLOTS from the first live node that answers (nil if none).
func (c *Cluster) slots() []redis.ClusterSlot {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, s := range c.Nodes {
		if s.cmd == nil {
			continue
		}
		if slots, err := s.admin().ClusterSlots(ctx).Result(); err == nil {
			return slots
		}
	}
	return nil
}

// Shards reads CLUSTER SLOTS from the first live node: one Shard per master.
func (c *Cluster) Shards() []Shard {
	var out []Shard
	seen := map[string]bool{}
	for _, r := range c.slots() {
		if len(r.Nodes) == 0 || seen[r.Nodes[0].Addr] {
			continue
		}
		seen[r.Nodes[0].Addr] = true
		sh := Shard{Master: r.Nodes[0].Addr, Start: r.Start}
		for _, n := range r.Nodes[1:] {
			sh.Replicas = append(sh.Replicas, n.Addr)
		}
		out = append(out, sh)
	}
	return out
}

// agreed: every node's CLUSTER SLOTS shows masters masters, each with a
// replica (nodes learn of each other's replicas by gossip, one after the
// other: a client that loads the map from a node that does not know a
// replica yet would never warm it).
func (c *Cluster) agreed(masters int) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, s := range c.Nodes {
		slots, err := s.admin().ClusterSlots(ctx).Result()
		if err != nil {
			return false
		}
		seen := map[string]bool{}
		for _, r := range slots {
			if len(r.Nodes) < 2 {
				return false
			}
			seen[r.Nodes[0].Addr] = true
		}
		if len(seen) != masters {
			return false
		}
	}
	return true
}

// Server returns the node listening on addr (nil if none).
func (c *Cluster) Server(addr string) *Server {
	for _, s := range c.Nodes {
		if s.Addr() == addr {
			return s
		}
	}
	return nil
}

// Kill SIGKILLs the node at addr.
func (c *Cluster) Kill(addr string) {
	c.t.Helper()
	s := c.Server(addr)
	if s == nil {
		c.t.Fatalf("redistest: no cluster node at %s", addr)
	}
	s.Kill()
}

// WaitPromoted waits (bounded by within) until the node at addr reports
// itself a master, and returns when it saw it: the moment of the promotion
// as near as a 10 ms poll can tell.
func (c *Cluster) WaitPromoted(addr string, within time.Duration) time.Time {
	c.t.Helper()
	s := c.Server(addr)
	if s == nil {
		c.t.Fatalf("redistest: no cluster node at %s", addr)
	}
	var at time.Time
	c.waitFor(within, addr+" to be promoted to master", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		role, err := s.admin().Do(ctx, "ROLE").Slice()
		if err == nil && len(role) > 0 && role[0] == "master" {
			at = time.Now()
			return true
		}
		return false
	})
	return at
}

func (c *Cluster) waitFor(within time.Duration, what string, ok func() bool) {
	c.t.Helper()
	deadline := time.Now().Add(within)
	for !ok() {
		if time.Now().After(deadline) {
			c.t.Fatalf("redistest: waited %v for %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// admin is a plain client for the harness's own questions, kept per server.
func (s *Server) admin() *redis.Client {
	if s.adm == nil {
		s.adm = redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: time.Second})
		s.t.Cleanup(func() { _ = s.adm.Close() })
	}
	return s.adm
}

// MasterOf is the address of the master serving slot, from CLUSTER SLOTS of
// the first live node ("" when none does).
func (c *Cluster) MasterOf(slot int) string {
	for _, r := range c.slots() {
		if slot >= r.Start && slot <= r.End && len(r.Nodes) > 0 {
			return r.Nodes[0].Addr
		}
	}
	return ""
}
