package edge

// The followers' side of cross-node coalescing (SPEC 18): a request whose
// Begin found another node's lease on its missing entry waits, at most
// cache.coalesce_wait, for the leader's end notice or a poll to find the
// entry. The node subscribes once, on one connection, to the one notice
// channel, and hands each notice to the requests waiting on that lease in
// process; the poll (a GET of the entry's key, which holds the lease until
// the entry replaces it, within redis.timeout) covers a notice lost while the subscription reconnects,
// and a leader that died (its lease runs out, not renewed).

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"switchyard/cluster"
)

// defaultCoalescePoll is Config.CoalescePoll when left zero.
const defaultCoalescePoll = 100 * time.Millisecond

// Why a follower stops waiting without an entry; the gateway then sends the
// request on alone.
var (
	// ErrLeaderFailed: the leader ended its lease without storing an entry
	// (its upstream call failed, its client went away, its answer was not
	// storable).
	ErrLeaderFailed = errors.New("edge: the coalescing leader ended without an answer to share")
	// ErrLeaseGone: the lease is gone and the entry absent (the leader's
	// node died and its lease ran out, or the notice was lost).
	ErrLeaseGone = errors.New("edge: the coalescing lease is gone and its entry was not stored")
	// ErrNotFollowing: Await was called for a request that follows no lease.
	ErrNotFollowing = errors.New("edge: Await called for a request that follows no coalescing lease (Begun.Coalesce is not CoalesceFollow)")
)

// notices is the node's one subscription to the leases' end notices, and
// the requests waiting on each lease. The subscription opens at the first
// Begin that asks for a lease and lives until Close; go-redis reconnects
// and subscribes again after a connection loss.
type notices struct {
	// Immutable after construction.
	c       Client
	channel string
	once    sync.Once

	mu      sync.Mutex
	ps      *redis.PubSub                     // guarded by mu; nil before start and after close
	closed  bool                              // guarded by mu
	waiting map[string]map[chan bool]struct{} // guarded by mu; lease name -> its waiters
	count   int                               // guarded by mu; the waiters of every lease
}

func newNotices(c Client, channel string) *notices {
	return &notices{c: c, channel: channel, waiting: map[string]map[chan bool]struct{}{}}
}

// start subscribes, once, without waiting: the request that calls it does
// not wait for the connection (a follower that waits before the
// subscription is live finds its entry by the poll).
func (n *notices) start() {
	n.once.Do(func() { go n.run() })
}

func (n *notices) run() {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return
	}
	ps := n.c.Subscribe(context.Background(), n.channel)
	n.ps = ps
	n.mu.Unlock()
	for m := range ps.Channel(redis.WithChannelSize(1024)) {
		if len(m.Payload) < 2 {
			continue
		}
		n.deliver(m.Payload[1:], m.Payload[0] == '1')
	}
}

// deliver hands a lease's end (done: its entry is stored) to the requests
// waiting on it, without blocking: a waiter's channel holds one notice.
func (n *notices) deliver(lease string, done bool) {
	n.mu.Lock()
	for ch := range n.waiting[lease] {
		select {
		case ch <- done:
		default:
		}
	}
	n.mu.Unlock()
}

// watch registers a waiter on lease; unwatch must follow.
func (n *notices) watch(lease string) chan bool {
	ch := make(chan bool, 1)
	n.mu.Lock()
	w := n.waiting[lease]
	if w == nil {
		w = map[chan bool]struct{}{}
		n.waiting[lease] = w
	}
	w[ch] = struct{}{}
	n.count++
	n.mu.Unlock()
	return ch
}

func (n *notices) unwatch(lease string, ch chan bool) {
	n.mu.Lock()
	if w := n.waiting[lease]; w != nil {
		if _, ok := w[ch]; ok {
			delete(w, ch)
			n.count--
		}
		if len(w) == 0 {
			delete(n.waiting, lease)
		}
	}
	n.mu.Unlock()
}

// waiters is how many requests wait on lease now (tests).
func (n *notices) waiters(lease string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.waiting[lease])
}

// Following is how many of this node's requests wait now for the answer
// of another node's request (Await).
func (r *Redis) Following() int {
	r.notices.mu.Lock()
	defer r.notices.mu.Unlock()
	return r.notices.count
}

func (n *notices) close() {
	n.mu.Lock()
	n.closed = true
	ps := n.ps
	n.ps = nil
	n.mu.Unlock()
	if ps != nil {
		_ = ps.Close()
	}
}

// Await implements State: it waits for the entry of the lease b follows,
// woken by the leader's notice or every CoalescePoll by a poll, each Redis
// call within redis.timeout, until ctx ends.
func (r *Redis) Await(ctx context.Context, b *Begun) (string, error) {
	if b.Coalesce != CoalesceFollow || b.lease == "" || b.team == nil {
		return "", ErrNotFollowing
	}
	ts := b.stateOf(r)
	entry := ts.keys.base() + b.q.Cache[b.q.Lease&1]
	ch := r.notices.watch(b.lease)
	defer r.notices.unwatch(b.lease, ch)
	poll := time.NewTimer(r.cfg.CoalescePoll)
	defer poll.Stop()
	for {
		select {
		case done := <-ch:
			if !done {
				return "", ErrLeaderFailed
			}
		case <-poll.C:
			poll.Reset(r.cfg.CoalescePoll)
		case <-ctx.Done():
			return "", ctx.Err()
		}
		if !r.sharedFor(ts.keys.base()) {
			return "", cluster.ErrBreakerOpen
		}
		cctx, cancel := context.WithTimeout(ctx, r.timeout)
		vals, err := r.c.MGet(cctx, entry).Result()
		cancel()
		if err == nil && len(vals) != 1 {
			err = errors.New("edge: MGET of an entry returned the wrong number of values")
		}
		if err != nil {
			if ctx.Err() != nil {
				return "", ctx.Err()
			}
			return "", err
		}
		v, ok := vals[0].(string)
		switch {
		case !ok:
			return "", ErrLeaseGone
		case !IsLease(v):
			return v, nil
		}
	}
}
