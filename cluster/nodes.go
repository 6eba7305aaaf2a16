package cluster

import (
	"context"
	"encoding/json"
	"strconv"
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
// set scored by time. Both share the {nodes} hash tag.
//
// Each beat also counts the live nodes (those seen within three intervals,
// this one included) and keeps the count in memory: Live answers without
// Redis, so the local fallback limiter of redis.expected_replicas: 0 can
// divide by the node count it last saw before Redis went away (SPEC 9).
type Heartbeat struct {
	// Immutable after NewHeartbeat.
	c        redis.UniversalClient
	setKey   string
	prefix   string
	interval time.Duration
	info     func() NodeInfo

	onLive func(n int) // nil, or told the live count after each beat that reached Redis; set before Run

	live atomic.Int64 // live nodes at the last successful beat; 0 before the first
}

// OnLive sets fn, told the live node count after every beat that reached
// Redis (the node moves its fallback divisor with it). Call it before Run;
// fn must be quick.
func (h *Heartbeat) OnLive(fn func(n int)) { h.onLive = fn }

// NewHeartbeat returns a heartbeat under prefix; info is read at each beat.
func NewHeartbeat(c redis.UniversalClient, prefix string, interval time.Duration, info func() NodeInfo) *Heartbeat {
	return &Heartbeat{c: c, setKey: prefix + "{nodes}:seen", prefix: prefix + "{nodes}:node:", interval: interval, info: info}
}

// Run beats until ctx ends.
func (h *Heartbeat) Run(ctx context.Context) {
	t := time.NewTicker(h.interval)
	defer t.Stop()
	for {
		h.beat(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (h *Heartbeat) beat(ctx context.Context) {
	info := h.info()
	info.Seen = time.Now()
	b, _ := json.Marshal(info)
	ttl := 3 * h.interval
	cctx, cancel := context.WithTimeout(ctx, max(h.interval/2, 100*time.Millisecond))
	defer cancel()
	var live *redis.IntCmd
	_, err := h.c.TxPipelined(cctx, func(p redis.Pipeliner) error {
		p.Set(cctx, h.prefix+info.Node, b, ttl)
		p.ZAdd(cctx, h.setKey, redis.Z{Score: float64(info.Seen.Unix()), Member: info.Node})
		p.ZRemRangeByScore(cctx, h.setKey, "-inf", "("+strconv.FormatInt(info.Seen.Add(-ttl).Unix(), 10))
		p.Expire(cctx, h.setKey, 10*ttl)
		live = p.ZCard(cctx, h.setKey) // what is left: the nodes seen within ttl, this one included
		return nil
	})
	if err == nil && live.Val() > 0 {
		h.live.Store(live.Val())
		if h.onLive != nil {
			h.onLive(int(live.Val()))
		}
	}
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

// Nodes lists the nodes seen within the last three intervals.
func (h *Heartbeat) Nodes(ctx context.Context) ([]NodeInfo, error) {
	ids, err := h.c.ZRangeByScore(ctx, h.setKey, &redis.ZRangeBy{
		Min: strconv.FormatInt(time.Now().Add(-3*h.interval).Unix(), 10), Max: "+inf"}).Result()
	if err != nil || len(ids) == 0 {
		return []NodeInfo{}, err
	}
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = h.prefix + id
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
