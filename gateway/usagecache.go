package gateway

import (
	"context"
	"errors"
	"sync"
	"time"

	"switchyard/edge"
)

// usageFresh is how long one read of the usage rows answers GET
// /admin/usage with the same query. The rows are behind by up to a usage
// flush (10 s) anyway. The console's usage page asks three times every 15
// s, once per grouping, and the grouping is applied after the read. With
// 10,000 teams over 30 days a read is 300,000 HGETALLs and 0.6-0.9 s of
// the node's and Redis's CPU: three reads a refresh became one.
const usageFresh = 5 * time.Second

// maxUsageReads bounds the reads kept (distinct queries in usageFresh).
const maxUsageReads = 32

// usageReads shares one read of the usage rows among the asks of the same
// query: those that arrive while it runs wait for it (each within its own
// request's context), and those up to usageFresh after it take its report.
// A failed read is not kept. Safe for concurrent use.
type usageReads struct {
	now func() time.Time

	mu    sync.Mutex
	reads map[string]*usageRead // guarded by mu; by query
}

// usageRead is one read: done is closed once rep and err are set.
type usageRead struct {
	done chan struct{}
	at   time.Time // when it finished
	rep  edge.UsageReport
	err  error
}

func newUsageReads(now func() time.Time) *usageReads {
	return &usageReads{now: now, reads: map[string]*usageRead{}}
}

// get returns the report of query, from a read in flight or finished less
// than usageFresh ago, else from read (run with a context of its own: the
// asks that wait for it must not fail because the first one went away;
// edge.UsageRows bounds it). ctx bounds this ask's wait.
func (u *usageReads) get(ctx context.Context, query string, read func(context.Context) (edge.UsageReport, error)) (edge.UsageReport, error) {
	now := u.now()
	u.mu.Lock()
	r := u.reads[query]
	if r != nil {
		select {
		case <-r.done:
			if r.err != nil || now.Sub(r.at) >= usageFresh {
				r = nil // failed or too old: read again
			}
		default: // in flight: wait for it
		}
	}
	lead := r == nil
	if lead {
		u.evictLocked(now)
		r = &usageRead{done: make(chan struct{})}
		u.reads[query] = r
	}
	u.mu.Unlock()
	if lead {
		u.lead(ctx, r, read)
		return r.rep, r.err
	}
	select {
	case <-r.done:
		return r.rep, r.err
	case <-ctx.Done():
		return edge.UsageReport{}, ctx.Err()
	}
}

// lead runs read for r and publishes its answer. A read that panics (a
// bug; the request's recovery answers it) still ends r, as failed, before
// the panic goes on: left in flight, its query's every later ask would
// wait for it until its own context ended, and none would read again.
func (u *usageReads) lead(ctx context.Context, r *usageRead, read func(context.Context) (edge.UsageReport, error)) {
	ok := false
	defer func() {
		if !ok {
			r.rep, r.err = edge.UsageReport{}, errUsageReadPanicked
		}
		r.at = u.now()
		close(r.done)
	}()
	r.rep, r.err = read(context.WithoutCancel(ctx))
	ok = true
}

// errUsageReadPanicked is what the asks waiting for a read that panicked get.
var errUsageReadPanicked = errors.New("the usage read failed with an internal error")

// evictLocked drops finished reads older than usageFresh, and when the
// map still holds maxUsageReads, every finished one.
func (u *usageReads) evictLocked(now time.Time) {
	for _, all := range []bool{false, true} {
		if all && len(u.reads) < maxUsageReads {
			return
		}
		for q, r := range u.reads {
			select {
			case <-r.done:
				if all || now.Sub(r.at) >= usageFresh {
					delete(u.reads, q)
				}
			default:
			}
		}
	}
}
