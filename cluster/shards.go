package cluster

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// ReloadEvery is the least time between two slot-map reloads that a failure
// asks for. go-redis reloads the map only periodically and on MOVED, so
// after a master died its slots kept pointing at the dead address for up to
// a minute; here every counted failure, every failed probe and every
// Available on a key whose shard is down asks for one, at most this often.
const ReloadEvery = 250 * time.Millisecond

// shardSet is the Cluster side of a Conn: one breaker per node address, the
// slot map as this node last loaded it (which node serves each slot), and
// the loader go-redis calls for it (ClusterOptions.ClusterSlots), so that
// both see the same map.
//
// A key's breaker is the breaker of its slot's master. When that master dies
// its breaker opens (its probe asks that node only, so it cannot be closed
// by another shard answering); the failures ask for a reload; once the
// cluster has promoted a replica the reloaded map names the replica, whose
// breaker is closed, and the key is shared again. Keys of other shards never
// look at the dead node's breaker.
type shardSet struct {
	// Immutable after construction (reload is set once, before any call).
	seeds   []string
	base    *redis.Options // credentials, TLS and bounds of the loader's connections
	timeout time.Duration
	opts    Options
	summary *Breaker // up when every master in the map is up
	reload  func()   // asks go-redis for a slot-map reload (ClusterClient.ReloadState); set once, before any call

	mu    sync.Mutex
	nodes map[string]*shardNode // guarded by mu; by nodeKey(addr)

	slots      atomic.Pointer[slotMap] // nil until the first load
	lastReload atomic.Int64            // UnixNano of the last reload asked for
}

// shardNode is one Redis node: its breaker (installed as the Limiter of
// go-redis's client for it) and the loader's own small client.
type shardNode struct {
	addr string
	br   *Breaker

	once sync.Once
	ctl  atomic.Pointer[redis.Client] // CLUSTER SLOTS only; created on first use
}

// slotMap is one loaded slot map: for each hash slot the index (plus one,
// zero when no node serves it) of its master.
type slotMap struct {
	owner   [16384]uint16
	masters []*shardNode
	nodes   []*shardNode // masters and replicas, for the next load
}

func newShardSet(seeds []string, base *redis.Options, timeout time.Duration, o Options, summary *Breaker) *shardSet {
	return &shardSet{seeds: seeds, base: base, timeout: timeout, opts: o, summary: summary, nodes: map[string]*shardNode{}}
}

// nodeKey names a node address so that the address a node announces in
// CLUSTER SLOTS and the one go-redis dials agree: go-redis rewrites a
// loopback host to the (here empty) origin host, "127.0.0.1:7000" to
// ":7000".
func nodeKey(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host == "" || host == "localhost" || (ip != nil && ip.IsLoopback()) {
		return "loopback:" + port
	}
	return addr
}

// node returns the node for addr, creating it (and its breaker, whose probe
// PINGs that address alone) on first sight.
func (s *shardSet) node(addr string) *shardNode {
	k := nodeKey(addr)
	s.mu.Lock()
	defer s.mu.Unlock()
	if n, ok := s.nodes[k]; ok {
		return n
	}
	br := s.opts.newBreaker()
	br.onFailure = s.reloadSoon
	br.SetProbe(pingProbe(redis.NewDialer(&redis.Options{DialTimeout: s.timeout, TLSConfig: s.base.TLSConfig}), "tcp", []string{addr}, s.timeout))
	br.OnChange(func(bool) { s.refreshSummary() })
	n := &shardNode{addr: addr, br: br}
	s.nodes[k] = n
	return n
}

// available implements Conn.Available on Cluster.
func (s *shardSet) available(key string) bool {
	m := s.slots.Load()
	if m == nil {
		// No map yet: the first call loads it (bounded by its own
		// deadline); say no only when every seed is known to be down.
		for _, a := range s.seeds {
			if s.node(a).br.Available() {
				return true
			}
		}
		return false
	}
	i := m.owner[Slot(key)]
	if i == 0 { // no master serves the slot (resharding, or a lost shard with no replica)
		s.reloadSoon()
		return false
	}
	if m.masters[i-1].br.Available() {
		return true
	}
	s.reloadSoon()
	return false
}

func (s *shardSet) breakerFor(key string) *Breaker {
	m := s.slots.Load()
	if m == nil {
		return nil
	}
	if i := m.owner[Slot(key)]; i > 0 {
		return m.masters[i-1].br
	}
	return nil
}

// reloadSoon asks go-redis to reload the slot map (through loadSlots, in
// its own goroutine), at most once per ReloadEvery. It never waits.
func (s *shardSet) reloadSoon() {
	if s.reload == nil {
		return
	}
	now := s.clock().UnixNano()
	last := s.lastReload.Load()
	// a last reload "in the future" is a wall clock stepped back since: it
	// does not hold reloads off for the size of the step
	if d := now - last; (d >= 0 && d < int64(ReloadEvery)) || !s.lastReload.CompareAndSwap(last, now) {
		return
	}
	s.reload()
}

func (s *shardSet) clock() time.Time {
	if s.opts.Clock != nil {
		return s.opts.Clock()
	}
	return time.Now()
}

// loadSlots is ClusterOptions.ClusterSlots: CLUSTER SLOTS from one node,
// trying the nodes of the last map and the seeds in random order, nodes
// whose breaker is open last. The loader's connections are its own, one per
// node, so a reload never waits behind a burst of requests. It records the
// map for Available before go-redis uses it.
func (s *shardSet) loadSlots(ctx context.Context) ([]redis.ClusterSlot, error) {
	var up, down []*shardNode
	seen := map[*shardNode]bool{}
	add := func(n *shardNode) {
		if seen[n] {
			return
		}
		seen[n] = true
		if n.br.Up() {
			up = append(up, n)
		} else {
			down = append(down, n)
		}
	}
	if m := s.slots.Load(); m != nil {
		for _, n := range m.nodes {
			add(n)
		}
	}
	for _, a := range s.seeds {
		add(s.node(a))
	}
	rand.Shuffle(len(up), func(i, j int) { up[i], up[j] = up[j], up[i] })
	var firstErr error
	for _, n := range append(up, down...) {
		slots, err := s.ctlClient(n).ClusterSlots(ctx).Result()
		if err == nil && len(slots) == 0 {
			err = errors.New("cluster: CLUSTER SLOTS from " + n.addr + " is empty (slots not assigned yet)")
		}
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			if ctx.Err() != nil {
				break
			}
			continue
		}
		fillHosts(slots, n.addr)
		s.slots.Store(s.buildMap(slots))
		s.refreshSummary()
		return slots, nil
	}
	return nil, firstErr
}

// fillHosts gives a node that announces no host ("" or "?", a node that does
// not know its own address) the host of the node that answered.
func fillHosts(slots []redis.ClusterSlot, from string) {
	host, _, _ := net.SplitHostPort(from)
	for i := range slots {
		for j := range slots[i].Nodes {
			a := &slots[i].Nodes[j].Addr
			if h, p, err := net.SplitHostPort(*a); err == nil && (h == "" || h == "?") {
				*a = net.JoinHostPort(host, p)
			}
		}
	}
}

func (s *shardSet) buildMap(slots []redis.ClusterSlot) *slotMap {
	m := &slotMap{}
	index := map[*shardNode]uint16{}
	seen := map[*shardNode]bool{}
	for _, r := range slots {
		if len(r.Nodes) == 0 {
			continue
		}
		master := s.node(r.Nodes[0].Addr)
		i, ok := index[master]
		if !ok {
			m.masters = append(m.masters, master)
			i = uint16(len(m.masters))
			index[master] = i
		}
		for slot := max(r.Start, 0); slot <= min(r.End, 16383); slot++ {
			m.owner[slot] = i
		}
		for _, nd := range r.Nodes {
			if n := s.node(nd.Addr); !seen[n] {
				seen[n] = true
				m.nodes = append(m.nodes, n)
			}
		}
	}
	return m
}

// ctlClient is n's loader client: one connection, the Cluster's credentials
// and bounds, no breaker (its calls must not count against the node's
// request traffic, and an open breaker only moves the node to the end of
// the list).
func (s *shardSet) ctlClient(n *shardNode) *redis.Client {
	n.once.Do(func() {
		o := *s.base
		o.Addr = n.addr
		o.PoolSize, o.MinIdleConns = 1, 0
		o.Limiter = nil
		n.ctl.Store(redis.NewClient(&o))
	})
	return n.ctl.Load()
}

// refreshSummary sets the summary breaker: up when the map has masters and
// every one of them is up.
func (s *shardSet) refreshSummary() {
	m := s.slots.Load()
	if m == nil {
		return
	}
	up := len(m.masters) > 0
	for _, n := range m.masters {
		up = up && n.br.Up()
	}
	s.summary.set(up)
}

func (s *shardSet) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range s.nodes {
		if c := n.ctl.Load(); c != nil {
			_ = c.Close()
		}
	}
}
