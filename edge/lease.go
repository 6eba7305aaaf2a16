package edge

// The leader's side of cross-node coalescing (SPEC 18): Begin takes the
// lease of a missing response-cache entry in its one round trip (leaseLua
// inside beginLua, gcraLua or readLua), the writer renews it like a slot
// lease while the request runs, and Finish ends it through the writer,
// after the entry's SET and in the same script, publishing the outcome when
// a follower marked it. The followers' side is in notices.go.

import (
	"context"
	"errors"
	"strconv"
	"time"

	"switchyard/catalog"
	"switchyard/cluster"
)

// leaseReq is the lease a Begin asks for: its full name, the token that
// makes this request its holder, its ttl in ms, and until when the writer
// may renew it (the request's deadline on the edge's clock; zero: until
// Finish).
type leaseReq struct {
	key, tok string
	ttl      int64
	until    time.Time
}

// The ops of a lease write (finishLua).
const (
	leaseRenew = 0
	leaseDone  = 1 // ended with its entry stored
	leaseFail  = 2 // ended without it: the followers go on alone
)

// leaseOp is one lease write the writer sends: a renewal or an end.
type leaseOp struct {
	key, tok string
	op       int
	ttl      int64  // ms, for a renewal
	entry    string // the entry's pin name (an end with the entry waits for its SET)
}

// leaseHold is a lease this node holds while its request runs: the writer
// renews it until until (the request's deadline, so a lease lives at most
// server.request_timeout).
type leaseHold struct {
	tok   string
	until time.Time
}

// newLease is the lease Begin asks for on the entry named entry of ts's
// team, held in the entry's own key (LeaseMark): a fresh token (LeaseMark,
// this node's id and a sequence number: X-Request-Id is the client's and
// not unique) and a ttl of one slot lease, cut to the request's deadline.
func (r *Redis) newLease(ctx context.Context, ts *teamState, entry string) *leaseReq {
	ls := &leaseReq{key: ts.keys.base() + entry, tok: LeaseMark + r.node + ":" + strconv.FormatUint(r.seq.Add(1), 36)}
	ttl := r.cfg.SlotLease
	if d, ok := ctx.Deadline(); ok {
		left := time.Until(d)
		ttl, ls.until = min(ttl, left), r.cfg.Clock().Add(left)
	}
	ls.ttl = max(1, ttl.Milliseconds())
	return ls
}

// leaseRole records in b the role Begin's script reported for ls (leaseLua:
// 0 none, 1 lead, 2 follow); a leader's lease is renewed by the writer
// until Finish ends it.
func (r *Redis) leaseRole(b *Begun, ts *teamState, ls *leaseReq, role int64) {
	switch role {
	case 1:
		b.Coalesce, b.lease, b.tok = CoalesceLead, ls.key, ls.tok
		ts.holdLease(b.team, ls.key, leaseHold{tok: ls.tok, until: ls.until})
	case 2:
		b.Coalesce, b.lease = CoalesceFollow, ls.key
	}
}

// readLease is Begin's one round trip for a team without limits whose
// request asks for a lease: the pins keys and the lease (readLua).
func (r *Redis) readLease(ctx context.Context, keys []string, ls *leaseReq) ([]any, int64, error) {
	cctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	res, err := readScript.Run(cctx, r.c, append(keys, ls.key), ls.ttl, ls.tok).Slice()
	if err == nil && len(res) != len(keys)+1 {
		err = errors.New("edge: the read script returned " + strconv.Itoa(len(res)) + " values for " + strconv.Itoa(len(keys)) + " pins and a lease")
	}
	if err != nil {
		return nil, 0, err
	}
	role, _ := res[len(keys)].(int64)
	return res[:len(keys)], role, nil
}

// lostLease is Begin's answer when its round trip failed: the request
// leads (its node's own requests coalesce in process) without a lease in
// Redis. Unless the call was never sent, the script may have taken the
// lease, so its end is queued now: other nodes' requests that found it do
// not wait for a leader that never knew it led.
func (r *Redis) lostLease(b *Begun, ts *teamState, t *catalog.Team, ls *leaseReq, err error) {
	b.Coalesce = CoalesceLead
	if errors.Is(err, cluster.ErrBreakerOpen) || errors.Is(err, errLate) {
		return
	}
	w := finishWrite{lease: leaseOp{key: ls.key, tok: ls.tok, op: leaseFail}}
	if visit, urgent := ts.add(t, &w, r.w, r.cfg.MaxPins); visit {
		r.w.markDirty(ts, urgent)
	}
}

// DropLease implements LeaseDropper: the end of b's lease goes to the
// writer at once (urgent, like a failed leader's), and b leaves
// cross-node coalescing.
func (r *Redis) DropLease(b *Begun) {
	if b.Coalesce == CoalesceLead && b.tok != "" && b.team != nil {
		ts := b.stateOf(r)
		w := finishWrite{lease: leaseOp{key: b.lease, tok: b.tok, op: leaseFail}}
		if visit, urgent := ts.add(b.team, &w, r.w, r.cfg.MaxPins); visit {
			r.w.markDirty(ts, urgent)
		}
	}
	b.Coalesce, b.lease, b.tok = CoalesceNone, "", ""
}

// endLease is the lease write of Finish for b: ended with the entry when o
// stores the entry the lease covers, else without it.
func (b *Begun) endLease(o *Outcome) leaseOp {
	op := leaseFail
	entry := b.q.Cache[b.q.Lease&1]
	if o.CacheKey != "" && o.CacheKey == entry && o.CacheTTL > 0 {
		op = leaseDone
	}
	return leaseOp{key: b.lease, tok: b.tok, op: op, entry: entry}
}

// holdLease registers a lease this node holds for team t: the writer
// renews it.
func (ts *teamState) holdLease(t *catalog.Team, key string, h leaseHold) {
	ts.mu.Lock()
	ts.team = t
	if ts.leases == nil {
		ts.leases = map[string]leaseHold{}
	}
	ts.leases[key] = h
	ts.mu.Unlock()
}

// endLeaseLocked queues the end of a lease (ts.mu held) and forgets its
// hold; stored says whether the entry's write was kept for Redis (an
// entry past the writer's bound was not: the lease then ends without it).
// It reports whether the end is urgent: a failure releases the followers
// at once (SPEC 18), while an end with the entry goes with the next flush,
// beside the entry's SET; and whether an older end was dropped to bound
// the pending ones (while Redis is away: that lease runs out instead).
func (ts *teamState) endLeaseLocked(op leaseOp, stored bool) (urgent, dropped bool) {
	if h, ok := ts.leases[op.key]; ok && h.tok == op.tok {
		delete(ts.leases, op.key)
	}
	if op.op == leaseDone && !stored {
		op.op = leaseFail
	}
	if len(ts.leaseOps) >= maxReleases {
		ts.leaseOps, dropped = ts.leaseOps[1:], true // the oldest: its lease runs out first
	}
	ts.leaseOps = append(ts.leaseOps, op)
	return op.op == leaseFail, dropped
}

// takeLeasesLocked is the lease writes of a batch (ts.mu held, after the
// batch took its pins): the ends queued, but not an end with the entry
// whose SET waits for a later batch (its notice must not come first), and
// with renew a renewal of every lease held, for one slot lease cut to the
// request's deadline (one past it is left to expire).
func (ts *teamState) takeLeasesLocked(now time.Time, renew bool, lease time.Duration) []leaseOp {
	var out []leaseOp
	if len(ts.leaseOps) > 0 {
		keep := ts.leaseOps[:0]
		for _, op := range ts.leaseOps {
			if _, later := ts.pins[op.entry]; (op.op == leaseDone && later) || len(out) == maxBatchItems {
				keep = append(keep, op)
				continue
			}
			out = append(out, op)
		}
		clear(ts.leaseOps[len(keep):])
		ts.leaseOps = keep
		if len(keep) == 0 {
			ts.leaseOps = nil
		}
	}
	if renew {
		for k, h := range ts.leases {
			ttl := lease
			if !h.until.IsZero() {
				if ttl = min(ttl, h.until.Sub(now)); ttl <= 0 {
					continue
				}
			}
			out = append(out, leaseOp{key: k, tok: h.tok, op: leaseRenew, ttl: max(1, ttl.Milliseconds())})
		}
	}
	return out
}

// appendLeases adds a batch's lease writes to a finishLua call.
func appendLeases(keys []string, args []any, ops []leaseOp) ([]string, []any) {
	args = append(args, len(ops))
	for _, op := range ops {
		keys = append(keys, op.key)
		args = append(args, op.tok, op.op, op.ttl)
	}
	return keys, args
}
