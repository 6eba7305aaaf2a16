package cluster

import (
	"context"
	"encoding/json"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// NodeInfo is what a node announces in its heartbeat (GET /admin/cluster).
type NodeInfo struct {
	Node           string    `json:"node"`
	CatalogVersion int64     `json:"catalog_version"`
	Redis          string    `json:"redis"`
	Started        time.Time `json:"started"`
	Seen           time.Time `json:"seen"`
}

// Heartbeat announces this node every interval: a key with a TTL of three
// intervals (so a dead node disappears by itself) and a member of a sorted
// set scored by time. Both share the {nodes} hash tag.
type Heartbeat struct {
	c        redis.UniversalClient
	setKey   string
	prefix   string
	interval time.Duration
	info     func() NodeInfo
}

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
	_, _ = h.c.TxPipelined(cctx, func(p redis.Pipeliner) error {
		p.Set(cctx, h.prefix+info.Node, b, ttl)
		p.ZAdd(cctx, h.setKey, redis.Z{Score: float64(info.Seen.Unix()), Member: info.Node})
		p.ZRemRangeByScore(cctx, h.setKey, "-inf", strconv.FormatInt(info.Seen.Add(-ttl).Unix(), 10))
		p.Expire(cctx, h.setKey, 10*ttl)
		return nil
	})
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
