package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// NodeInfo is what a node announces in its heartbeat (GET /admin/cluster).
type NodeInfo struct {
	Node           string    `json:"node"`
	Version        string    `json:"version,omitempty"` // the build's version
	CatalogVersion int64     `json:"catalog_version"`
	Redis          string    `json:"redis"`
	Started        time.Time `json:"started"`
	Seen           time.Time `json:"seen"`
	// Health is the node's deployment health snapshot (SPEC 6) as of this
	// beat, so GET /admin/health?node=all on any replica answers for every
	// live node (SPEC 11). Opaque JSON here: cluster does not know routing.
	Health json.RawMessage `json:"health,omitempty"`
}

// Heartbeat announces this node every interval: a key with a TTL of three
// intervals (so a dead node disappears by itself) and a member of a sorted
// set scored by Redis's clock. Both share the {nodes} hash tag.
//
// Each beat also counts the live nodes (those seen within three intervals,
// this one included) and keeps the count in memory: Live answers without
// Redis, so the local fallback limiter of redis.expected_replicas: 0 can
// divide by the node count it last saw before Redis went away (SPEC 9).
//
// A member is the node id and this process's random token, so two replicas
// configured with one server.node_id are still two live nodes (each would
// otherwise admit a half share too much during an outage); a beat that sees
// another process under its own id logs an error and tells OnCollision.
// Scores are Redis's TIME, not the nodes' clocks: a node whose clock is
// behind is not pruned by the others, and a dead one whose clock was ahead
// does not outlive its three intervals.
type Heartbeat struct {
	// Immutable after NewHeartbeat.
	c        redis.UniversalClient
	setKey   string
	prefix   string
	token    string // this process's, in its member of the set
	interval time.Duration
	info     func() NodeInfo
	now      func() time.Time // the node's clock (NodeInfo.Seen); tests set it
	log      *slog.Logger

	// Set before Run, read by its goroutine.
	onLive      func(n int)                   // nil, or told the live count after each beat that reached Redis
	onCollision func(node string, others int) // nil, or told of other processes under this node's id

	live atomic.Int64 // live nodes at the last successful beat; 0 before the first

	// The beating goroutine's own (no lock).
	colliding int // other processes under this id at the last beat
}

// OnLive sets fn, told the live node count after every beat that reached
// Redis (the node moves its fallback divisor with it). Call it before Run;
// fn must be quick.
func (h *Heartbeat) OnLive(fn func(n int)) { h.onLive = fn }

// OnCollision sets fn, told at every beat that sees other live processes
// announcing this node's id (a misconfigured server.node_id): the node
// counts them in a metric. Call it before Run; fn must be quick.
func (h *Heartbeat) OnCollision(fn func(node string, others int)) { h.onCollision = fn }

// NewHeartbeat returns a heartbeat under prefix; info is read at each beat.
func NewHeartbeat(c redis.UniversalClient, prefix string, interval time.Duration, info func() NodeInfo) *Heartbeat {
	var tok [tokenBytes]byte
	_, _ = rand.Read(tok[:])
	return &Heartbeat{c: c, setKey: prefix + "{nodes}:seen", prefix: prefix + "{nodes}:node:", token: hex.EncodeToString(tok[:]),
		interval: interval, info: info, now: time.Now, log: slog.Default()}
}

// tokenBytes is the size of a process's token; a member is the node id,
// tokenSep and the token in hex.
const (
	tokenBytes = 6
	tokenSep   = '#'
)

// member is the set member of node id for this process.
func (h *Heartbeat) member(id string) string { return id + string(tokenSep) + h.token }

// memberID splits a member into the node id and the process token ("" for
// a member written without one, by an older version).
func memberID(m string) (id, token string) {
	n := len(m) - 2*tokenBytes - 1
	if n < 0 || m[n] != tokenSep {
		return m, ""
	}
	for _, c := range m[n+1:] {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return m, ""
		}
	}
	return m[:n], m[n+1:]
}

// beatLua is one beat on Redis's clock: the node's info key, its member
// scored by now (seconds, fractional), the members older than the TTL
// pruned, and the live members returned.
//
//	KEYS: 1 the set, 2 the node's info key
//	ARGV: 1 the member, 2 the info, 3 the TTL (ms)
var beatLua = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1e6
local ttl = tonumber(ARGV[3])
redis.call('SET', KEYS[2], ARGV[2], 'PX', ttl)
redis.call('ZADD', KEYS[1], string.format('%.6f', now), ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('(%.6f', now - ttl / 1000))
redis.call('PEXPIRE', KEYS[1], 10 * ttl)
return redis.call('ZRANGE', KEYS[1], 0, -1)
`)

// Run beats until ctx ends, then takes this process's member out of the
// set (a node restarting under its id is not counted twice meanwhile).
func (h *Heartbeat) Run(ctx context.Context) {
	t := time.NewTicker(h.interval)
	defer t.Stop()
	for {
		h.beat(ctx)
		select {
		case <-ctx.Done():
			h.leave()
			return
		case <-t.C:
		}
	}
}

// timeout bounds one call of the heartbeat.
func (h *Heartbeat) timeout() time.Duration { return max(h.interval/2, 100*time.Millisecond) }

func (h *Heartbeat) beat(ctx context.Context) {
	info := h.info()
	info.Seen = h.now()
	b, _ := json.Marshal(info)
	ttl := 3 * h.interval
	cctx, cancel := context.WithTimeout(ctx, h.timeout())
	defer cancel()
	members, err := beatLua.Run(cctx, h.c, []string{h.setKey, h.prefix + info.Node}, h.member(info.Node), b, ttl.Milliseconds()).StringSlice()
	if err != nil || len(members) == 0 {
		return
	}
	others := 0
	for _, m := range members {
		if id, tok := memberID(m); id == info.Node && tok != "" && tok != h.token {
			others++
		}
	}
	h.live.Store(int64(len(members)))
	if others != h.colliding {
		if others > 0 {
			h.log.Error("another live process announces this node's server.node_id: give every replica its own node_id (both are counted as live nodes meanwhile)",
				"node_id", info.Node, "others", others)
		} else {
			h.log.Info("no other live process announces this node's server.node_id any more", "node_id", info.Node)
		}
		h.colliding = others
	}
	if others > 0 && h.onCollision != nil {
		h.onCollision(info.Node, others)
	}
	if h.onLive != nil {
		h.onLive(len(members))
	}
}

// leave takes this process's member out of the set, within one beat's
// timeout (the node is stopping: the client may be closing already).
func (h *Heartbeat) leave() {
	ctx, cancel := context.WithTimeout(context.Background(), h.timeout())
	defer cancel()
	_ = h.c.ZRem(ctx, h.setKey, h.member(h.info().Node)).Err()
}

// Live is the number of live nodes (seen within three intervals, this one
// included) at the last beat that reached Redis, or 0 before the first. It
// never touches Redis: while Redis is down it keeps the last count.
func (h *Heartbeat) Live() int { return int(h.live.Load()) }

// Divisor is the local fallback's share for expectedReplicas
// (redis.expected_replicas): the configured number when it is >= 1; for 0
// the live node count from the heartbeats, or 1 before the first beat (a
// node alone must not under-admit; SPEC 9).
func (h *Heartbeat) Divisor(expectedReplicas int) int {
	if expectedReplicas >= 1 {
		return expectedReplicas
	}
	if h == nil {
		return 1
	}
	return max(1, h.Live())
}

// Nodes lists the nodes seen within the last three intervals (on Redis's
// clock: the beats prune the set, and a node's info key expires with its
// three intervals), each id once.
func (h *Heartbeat) Nodes(ctx context.Context) ([]NodeInfo, error) {
	members, err := h.c.ZRange(ctx, h.setKey, 0, -1).Result()
	if err != nil || len(members) == 0 {
		return []NodeInfo{}, err
	}
	keys := make([]string, 0, len(members))
	seen := make(map[string]bool, len(members))
	for _, m := range members {
		if id, _ := memberID(m); !seen[id] {
			seen[id] = true
			keys = append(keys, h.prefix+id)
		}
	}
	vals, err := h.c.MGet(ctx, keys...).Result()
	if err != nil {
		return nil, err
	}
	out := make([]NodeInfo, 0, len(vals))
	for _, v := range vals {
		s, ok := v.(string)
		if !ok {
			continue
		}
		var n NodeInfo
		if json.Unmarshal([]byte(s), &n) == nil {
			out = append(out, n)
		}
	}
	return out, nil
}
