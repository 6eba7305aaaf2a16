package edge

// The writer's rhythm: what Finish queues is either prompt (another
// node's next request looks for it: a slot release, a pin, a cache entry, a
// lease end), sent on the writer's next tick, or lazy (the settlement of a
// reservation, usage, audit entries), sent within lazyEvery or once
// lazyBatch wait; renewals, held usage and retries keep their own times.

import "time"

// markDirty queues ts for the next tick; urgent wakes the writer now.
func (w *writer) markDirty(ts *teamState, urgent bool) {
	w.queue(ts)
	w.prompt.Store(true)
	if urgent {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

// markLazy queues ts, whose new writes are lazy (finishWrite.lazy), for
// a round within lazyEvery.
func (w *writer) markLazy(ts *teamState) {
	w.queue(ts)
	w.stampLazy()
}

// stampLazy records that a lazy write waits, from now unless an older one
// does: the clock is read only for the first since the last round.
func (w *writer) stampLazy() {
	if w.lazySince.Load() == 0 {
		w.lazySince.CompareAndSwap(0, w.r.cfg.Clock().UnixNano())
	}
}

// queue adds ts to the teams the next round visits, once.
func (w *writer) queue(ts *teamState) {
	ts.mu.Lock()
	queued := ts.dirty
	ts.dirty = true
	ts.mu.Unlock()
	if !queued {
		w.dmu.Lock()
		w.dirty = append(w.dirty, ts)
		w.dmu.Unlock()
	}
}

// due reports whether a tick at now runs a round: a prompt write waits,
// the last round failed, renewals, held usage or the usage report are
// due, or lazy writes have waited lazyEvery or piled up to lazyBatch. A
// node serving a request now and then (one at a time) so sends a round
// every lazyEvery instead of one every tick for each request or two: on
// a 2-CPU VM that round's write and read cost about 80 µs of CPU a
// request, and 14 µs of each request's latency.
func (w *writer) due(now time.Time) bool {
	if w.prompt.Load() || w.failed || !now.Before(w.nextRenew) || (w.usage != nil && !now.Before(w.nextUsage)) {
		return true
	}
	if w.heldHead < len(w.held) && now.UnixNano() >= w.held[w.heldHead].due {
		return true
	}
	since := w.lazySince.Load()
	if since == 0 {
		return false
	}
	if now.UnixNano()-since >= int64(lazyEvery) || len(w.auditQ) >= lazyBatch {
		return true
	}
	w.dmu.Lock()
	n := len(w.dirty)
	w.dmu.Unlock()
	return n >= lazyBatch
}
