package ratelimit

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"switchyard/catalog"
)

// Flusher bounds.
const (
	defaultRetry       = 200 * time.Millisecond // wait after a failed write
	markTTL            = 24 * time.Hour         // life of a node's applied-batch mark
	maxBatchReleases   = 1000                   // slot ids per script call (Lua unpack limit)
	maxPendingReleases = 10000                  // per team; beyond, the slot TTL backstop frees them
	maxTeamsPerFlush   = 256                    // script calls per pipeline
)

// flusher writes the post-response updates (TPM corrections, spend, slot
// releases) to Redis in the background (SPEC 9: writes after the response are
// asynchronous and batched). Updates are coalesced per team in memory, so the
// queue is bounded by the number of teams, not of requests, and nothing is
// dropped while Redis is down: the sums are replayed when it returns.
//
// Exactly once: each team has at most one batch in flight. A batch whose
// write failed is resent as is, with its sequence number, before anything
// newer of that team; the script skips a sequence it has already applied
// (the first send may have gone through before the error).
type flusher struct {
	// Immutable after construction.
	client  Store
	keys    func(team string) *teamKeys
	obs     Observer
	timeout time.Duration

	retry atomic.Int64 // ns to wait after a failed write

	mu     sync.Mutex
	pend   map[string]*pending // guarded by mu
	seq    int64               // guarded by mu; last batch sequence number (from 0: the mark is per process, and Lua numbers are exact only below 2^53)
	closed bool                // guarded by mu

	wake chan struct{} // capacity 1: "something is pending"
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// pending is one team's unwritten updates. Guarded by flusher.mu.
type pending struct {
	team     *catalog.Team // latest limits seen (TPM converts tokens to time)
	tokens   int64         // TPM correction not yet sent
	usd      float64       // spend not yet sent
	n        int           // reconciles folded into tokens/usd
	releases []string      // slot ids not yet sent
	flight   *batch        // sent and not yet acknowledged; resent after a failure
}

// batch is one script call: an immutable snapshot of a team's updates.
type batch struct {
	team     *catalog.Team
	seq      int64
	tokens   int64
	usd      float64
	n        int
	releases []string
}

func newFlusher(c Store, keys func(string) *teamKeys, obs Observer, timeout time.Duration) *flusher {
	f := &flusher{
		client: c, keys: keys, obs: obs, timeout: timeout,
		pend: map[string]*pending{},
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
	}
	f.retry.Store(int64(defaultRetry))
	return f
}

// add folds a reconcile into the team's pending sums.
func (f *flusher) add(t *catalog.Team, tokens int64, usd float64) {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		f.obs.OnDropped(1)
		return
	}
	p := f.pendingLocked(t)
	p.tokens += tokens
	p.usd += usd
	p.n++
	f.mu.Unlock()
	f.signal()
}

// release queues a slot removal.
func (f *flusher) release(t *catalog.Team, slot string) {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		f.obs.OnDropped(1)
		return
	}
	p := f.pendingLocked(t)
	dropped := 0
	if len(p.releases) >= maxPendingReleases {
		p.releases = p.releases[1:] // oldest first: its TTL backstop is nearest
		dropped = 1
	}
	p.releases = append(p.releases, slot)
	f.mu.Unlock()
	if dropped > 0 {
		f.obs.OnDropped(dropped)
	}
	f.signal()
}

func (f *flusher) pendingLocked(t *catalog.Team) *pending {
	p := f.pend[t.Name]
	if p == nil {
		p = &pending{}
		f.pend[t.Name] = p
	}
	p.team = t
	return p
}

func (f *flusher) signal() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// lingerFor is how long the flusher waits after the first pending update
// before it writes: short against any limit's time scale (a minute).
const lingerFor = 5 * time.Millisecond

// run is the flusher goroutine: write whenever something is pending, so
// batches grow by themselves under load (everything that arrived during one
// write goes in the next), and back off after a failure.
func (f *flusher) run() {
	defer close(f.done)
	preload(f.client, f.timeout, admitScript, reconcileScript)
	for {
		select {
		case <-f.wake:
		case <-f.stop:
			return
		}
		// Linger a moment so one write carries many updates: under light
		// load the refunds and releases of one request would otherwise hit
		// Redis at the very moment the next request's admission does.
		linger := time.NewTimer(lingerFor)
		select {
		case <-linger.C:
		case <-f.stop:
			linger.Stop()
		}
		ok, more := f.flush(context.Background())
		if !ok {
			t := time.NewTimer(time.Duration(f.retry.Load()))
			select {
			case <-t.C:
			case <-f.stop:
				t.Stop()
				return
			}
		}
		if more || !ok || !f.empty() {
			f.signal() // leftovers, a failure to retry, or updates queued behind a batch in flight
		}
	}
}

// take snapshots up to maxTeamsPerFlush teams' updates into batches. A team
// with a batch in flight (a failed one waiting to be resent) contributes that
// batch, not its newer updates.
func (f *flusher) take() (bs []*batch, more bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for name, p := range f.pend {
		if len(bs) == maxTeamsPerFlush {
			return bs, true
		}
		if p.flight == nil {
			if p.tokens == 0 && p.usd == 0 && len(p.releases) == 0 {
				delete(f.pend, name)
				continue
			}
			f.seq++
			b := &batch{team: p.team, seq: f.seq, tokens: p.tokens, usd: p.usd, n: p.n}
			cut := min(len(p.releases), maxBatchReleases)
			b.releases = p.releases[:cut:cut]
			p.releases = p.releases[cut:]
			if len(p.releases) == 0 {
				p.releases = nil
			}
			p.tokens, p.usd, p.n = 0, 0, 0
			p.flight = b
		}
		bs = append(bs, p.flight)
	}
	return bs, false
}

// settle records the outcome of a batch: acknowledged, or kept in flight
// to be resent.
func (f *flusher) settle(b *batch, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.pend[b.team.Name]
	if p == nil || p.flight != b {
		return
	}
	if err == nil {
		p.flight = nil
	}
}

// flush writes one round of batches in one pipeline. ok is false when some
// write failed; more is true when teams were left for another round.
func (f *flusher) flush(ctx context.Context) (ok, more bool) {
	bs, more := f.take()
	if len(bs) == 0 {
		return true, false
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	calls := make([]scriptCall, len(bs))
	for i, b := range bs {
		args := make([]any, 0, 6+len(b.releases))
		args = append(args, max(0, b.team.TPM), b.tokens, b.usd, periodSeconds(b.team), b.seq, markTTL.Milliseconds())
		for _, id := range b.releases {
			args = append(args, id)
		}
		calls[i] = scriptCall{keys: f.keys(b.team.Name).reconcile, args: args}
	}
	cmds := evalPipelined(ctx, f.client, reconcileScript, calls)
	ok = true
	for i, b := range bs {
		err := cmds[i].Err()
		f.settle(b, err)
		if err != nil {
			ok = false
		}
	}
	return ok, more
}

// close stops the goroutine and writes what is pending until ctx ends; what
// is still unwritten then is counted as dropped.
func (f *flusher) close(ctx context.Context) error {
	f.once.Do(func() { close(f.stop) })
	<-f.done
	defer func() {
		f.mu.Lock()
		f.closed = true
		f.mu.Unlock()
	}()
	for {
		ok, more := f.flush(ctx)
		if ok && !more && f.empty() {
			return nil
		}
		if ctx.Err() != nil {
			f.obs.OnDropped(f.drain())
			return ctx.Err()
		}
		if !ok {
			t := time.NewTimer(time.Duration(f.retry.Load()))
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
			}
		}
	}
}

func (f *flusher) empty() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range f.pend {
		if p.flight != nil || p.n > 0 || p.tokens != 0 || p.usd != 0 || len(p.releases) > 0 {
			return false
		}
	}
	return true
}

// drain empties the queue and returns how many updates it held.
func (f *flusher) drain() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for name, p := range f.pend {
		n += p.n + len(p.releases)
		if p.flight != nil {
			n += p.flight.n + len(p.flight.releases)
		}
		delete(f.pend, name)
	}
	return n
}

// scriptCall is one script invocation in a pipeline.
type scriptCall struct {
	keys []string
	args []any
}

// evalPipelined runs s once per call in one pipeline (go-redis splits it per
// node on Cluster). Calls answered NOSCRIPT (the script cache was flushed:
// a restart, a failover) did not run; the script is loaded and they are sent
// once more.
func evalPipelined(ctx context.Context, c Store, s *redis.Script, calls []scriptCall) []*redis.Cmd {
	out := make([]*redis.Cmd, len(calls))
	_, _ = c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, call := range calls {
			out[i] = s.EvalSha(ctx, p, call.keys, call.args...)
		}
		return nil
	})
	var again []int
	for i, cmd := range out {
		if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
			again = append(again, i)
		}
	}
	if len(again) == 0 || s.Load(ctx, c).Err() != nil {
		return out
	}
	_, _ = c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, i := range again {
			out[i] = s.EvalSha(ctx, p, calls[i].keys, calls[i].args...)
		}
		return nil
	})
	return out
}

// preload loads scripts into Redis's script cache, so the first admissions
// of a new process each run one EVALSHA instead of EVALSHA, NOSCRIPT, EVAL.
// A failure is harmless: Run and evalPipelined load on demand.
func preload(c Store, timeout time.Duration, scripts ...*redis.Script) {
	if c == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for _, s := range scripts {
		if s.Load(ctx, c).Err() != nil {
			return
		}
	}
}
