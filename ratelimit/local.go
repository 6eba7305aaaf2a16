package ratelimit

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"switchyard/config"
	"switchyard/internal/registry"
)

// errNoTeam is returned for an Admission without a team.
var errNoTeam = errors.New("ratelimit: admission without a team")

// Local is the node-local limiter: GCRA for RPM and TPM, a slot map for
// max_parallel and a spend counter for the budget, on an injected clock, at
// every level of a request (SPEC 3.1: its team, its key, its end user). It
// is the limiter when Redis is not configured, and the fallback when it is
// unreachable; then every limit is divided by the divisor
// (redis.expected_replicas) so the cluster as a whole stays near its limit.
//
// State is per level, each behind its own mutex: teams never contend. An
// admission locks its levels in one order (team, key, user), so two never
// deadlock. Key and user levels are evicted once idle (sweep), so a million
// end users cost memory only while they are active; a level idle but for
// its spend in a budget window still open keeps only that spend, compact
// (restStore).
type Local struct {
	// Immutable after construction.
	clock func() time.Time
	rest  *restStore // the spend of key and user levels at rest

	div      atomic.Int64 // the divisor (>= 1); SetDivisor moves it with the live node count
	slotTTL  atomic.Int64 // ns; set before use
	seq      atomic.Uint64
	teams    registry.Map[*localTeam] // team name -> its state
	subs     registry.Map[*localTeam] // Level.Key -> its state: key and user levels
	nsubs    atomic.Int64
	sweepAt  atomic.Int64 // nsubs that triggers the next sweep
	restAt   atomic.Int64 // rest.n that triggers the next sweep
	sweeping atomic.Bool  // a sweep runs (at most one at a time)
	alert    atomic.Pointer[func(team string, level int, name string)]

	// skew and last make the GCRA's timeline (TATs, slot expiries) steady
	// when the wall clock steps back (steady).
	skew atomic.Int64 // ns added to the wall clock
	last atomic.Int64 // about the latest steady reading (ns), at most stepSlack stale
}

// stepSlack is how far back a wall-clock reading may be from the latest
// one before it counts as a step of the clock rather than two readers
// racing (goroutines that read the clock in one order and get here in the
// other).
const stepSlack = int64(time.Second)

// steady maps a wall-clock reading (ns) onto the timeline of the TATs and
// slot expiries: the wall clock plus the sum of its steps back. A step back
// would otherwise leave every TAT written before it that much further in
// the future, refusing a team that used its quota for the size of the step
// (an hour's NTP correction, an hour of 429s). Forward steps need no guard:
// buckets refill, at most one Window's quota early. Budget windows stay on
// the wall clock (UTC days and months, and the shared store's deadlines).
func (l *Local) steady(wall int64) int64 {
	for {
		skew, last := l.skew.Load(), l.last.Load()
		t := wall + skew
		switch {
		case t < last-stepSlack: // the clock stepped back: absorb the step
			if l.skew.CompareAndSwap(skew, skew+last-t) {
				return last
			}
			continue
		case t > last+int64(time.Millisecond): // a coarse high-water mark: few writes
			l.last.CompareAndSwap(last, t)
		}
		return t
	}
}

// SetBudgetAlert names what is called, once per level and period, when a
// reconciled spend crosses the level's budget.alert_at (SPEC 3.1; once per
// node here: the shared limiter alerts once for the cluster). level is 0
// team, 1 key, 2 user; name the key's or user's name.
func (l *Local) SetBudgetAlert(fn func(team string, level int, name string)) { l.alert.Store(&fn) }

// localTeam is one level's local state (a team's, a key's or a user's).
type localTeam struct {
	mu sync.Mutex
	// Guarded by mu.
	rpmTAT, tpmTAT int64            // ns
	slots          map[string]int64 // slot id -> expiry (ns), the TTL backstop; nil until the first
	period         int64            // budget period index of spent
	spent          float64          // USD spent in period, the reservations of requests still running included
	reserved       float64          // the part of spent that is reservations of admissions not yet reconciled
	nreserved      int64            // those admissions: at 0, reserved is exactly 0 (no float residue)
	blockedUntil   int64            // a budget block's end (ns): until then reservations of blockedFrom or more are refused
	blockedFrom    float64          // the smallest reservation (USD) the shared store refused (BlockBudget)
	alerted        int64            // 1 + the budget period whose alert was raised (0: none)
	code           int64            // PeriodCode of the budget spent counts in (0: none yet)
	gone           bool             // swept out of subs: look the level up again
}

// NewLocal returns a local limiter on clock with every limit divided by
// divisor (at least 1; a limit never drops below 1).
func NewLocal(clock func() time.Time, divisor int) *Local {
	if clock == nil {
		clock = time.Now
	}
	if divisor < 1 {
		divisor = 1
	}
	l := &Local{clock: clock, rest: newRestStore()}
	l.div.Store(int64(divisor))
	l.slotTTL.Store(int64(DefaultSlotTTL))
	l.sweepAt.Store(minSweep)
	l.restAt.Store(minSweep)
	return l
}

// SetDivisor changes the divisor (values below 1 mean 1): with
// redis.expected_replicas 0 the node sets it to the live node count of each
// heartbeat, so the count it last saw before Redis went away is the one
// its fallback divides by (SPEC 9).
func (l *Local) SetDivisor(n int) { l.div.Store(int64(max(1, n))) }

// SetSlotTTL sets the backstop expiry of a max_parallel slot (the request
// timeout plus a margin; DefaultSlotTTL when unset).
func (l *Local) SetSlotTTL(d time.Duration) {
	if d > 0 {
		l.slotTTL.Store(int64(d))
	}
}

// usdTolerance is how far a reservation may pass a budget: sums of decimal
// prices are not exact in binary (0.1+0.1+0.1 > 0.3), and the scripts use
// the same (beginLua's USDTOL).
const usdTolerance = 1e-9

// limits are a level's limits as this node enforces them.
type limits struct {
	rpm, tpm, parallel int64
	budget             float64
	period             int64 // PeriodCode of the budget's period
}

func (l *Local) scaled(c *config.Limits) limits {
	d := l.div.Load()
	div := func(v int64) int64 {
		if v <= 0 {
			return 0
		}
		return max(1, v/d)
	}
	return limits{
		rpm: div(c.RPM), tpm: div(c.TPM), parallel: div(c.MaxParallel),
		budget: max(0, c.Budget.USD) / float64(d), period: PeriodCode(BudgetPeriod(c.Budget)),
	}
}

func (l *Local) team(name string) *localTeam {
	if st, ok := l.teams.Load(name); ok {
		return st
	}
	st, _ := l.teams.LoadOrStore(name, &localTeam{}) // slots made by the first slot: most teams have no max_parallel
	return st
}

// sub is the state of a key or user level, made if new: from the level's
// spend at rest when it has some. The new state is locked until that spend
// is in it, and published under the record's shard lock, so no admission
// sees the level without its spend and no Spend adds to a record the level
// has left.
func (l *Local) sub(key string) *localTeam {
	if st, ok := l.subs.Load(key); ok {
		return st
	}
	st := &localTeam{}
	st.mu.Lock()
	sh, h := l.rest.shard(key)
	sh.mu.Lock()
	actual, loaded := l.subs.LoadOrStore(key, st)
	if !loaded {
		if rec, ok := l.rest.takeLocked(sh, h); ok {
			st.code, st.period, st.spent = rec.code, rec.period, rec.spent
		}
		if l.rest.nb.Load() > 0 {
			b := l.rest.takeBlockLocked(sh, h)
			st.blockedUntil, st.blockedFrom = b.until, b.from
		}
	}
	sh.mu.Unlock()
	st.mu.Unlock()
	if !loaded && l.nsubs.Add(1) >= l.sweepAt.Load() {
		l.startSweep()
	}
	return actual
}

// startSweep runs a sweep unless one runs.
func (l *Local) startSweep() {
	if l.sweeping.CompareAndSwap(false, true) {
		go func() { // off the request path: a million levels are a million-entry walk
			l.sweep()
			l.sweeping.Store(false)
		}()
	}
}

// lockSub is the key or user level under key, locked, made if new; a level
// the sweep dropped between its lookup and its lock is looked up again, so
// nothing is written into a level that is gone.
func (l *Local) lockSub(key string) *localTeam {
	for {
		st := l.sub(key)
		st.mu.Lock()
		if !st.gone {
			return st
		}
		st.mu.Unlock()
	}
}

// lockSubIfAny is lockSub for a level that has state: nil, and nothing
// made, when it has none (never made, or swept).
func (l *Local) lockSubIfAny(key string) *localTeam {
	st, ok := l.subs.Load(key)
	if !ok {
		return nil
	}
	st.mu.Lock()
	if st.gone {
		st.mu.Unlock()
		return nil
	}
	return st
}

// minSweep is the number of key and user levels below which none is swept.
const minSweep = 4096

// sweep drops the key and user levels at rest: both buckets full, no slot,
// no budget alert of the current window, no budget reservation of a
// request still running (its reconcile settles it here). What such a level spent in a
// budget window still open, and its budget block, move to the rest store,
// which drops them when the window or the block ends. It runs when either count doubled since the last
// sweep, so its cost per new level or record is O(1).
func (l *Local) sweep() {
	wall := l.clock().UnixNano()
	now := l.steady(wall) // TATs and slots; budgets are on wall
	l.subs.Range(func(k string, st *localTeam) {
		st.mu.Lock()
		st.purgeLocked(now)
		open := st.code != 0 && !st.spentExpired(wall) // its budget window
		idle := st.rpmTAT <= now && st.tpmTAT <= now && len(st.slots) == 0 &&
			!(open && (st.alerted == st.period+1 || st.nreserved > 0))
		if idle {
			sh, h := l.rest.shard(k)
			sh.mu.Lock()
			l.subs.Delete(k)
			if open && st.spent > 0 {
				l.rest.putLocked(sh, h, restSpend{period: st.period, spent: st.spent, code: st.code})
			}
			if st.blockedUntil > wall {
				l.rest.putBlockLocked(sh, h, restBlock{until: st.blockedUntil, from: st.blockedFrom}, wall)
			}
			sh.mu.Unlock()
			st.gone = true
			l.nsubs.Add(-1)
		}
		st.mu.Unlock()
	})
	l.rest.sweep(wall)
	l.sweepAt.Store(max(minSweep, 2*l.nsubs.Load()))
	l.restAt.Store(max(minSweep, 2*(l.rest.n.Load()+l.rest.nb.Load())))
}

// spentExpired reports whether the spend counted is of a budget window
// that has ended (st.mu held).
func (st *localTeam) spentExpired(now int64) bool {
	if st.code == 0 {
		return false
	}
	idx, _ := PeriodWindow(now, st.code, st.period)
	return st.period != idx
}

// Level is a key or end-user level of an admission (SPEC 3.1).
type Level struct {
	// Key names the level's state, unique across teams and levels (the
	// caller scopes it by team and kind).
	Key string
	// Name is how an alert names it (the key's name, the end user).
	Name      string
	Limits    *config.Limits // nil: the request has no such level
	HeldUSD   float64        // Admission.HeldUSD at this level
	HeldSlots int64          // Admission.HeldSlots at this level
}

// lvl is one level of an admission while it is decided.
type lvl struct {
	kind int // 0 team, 1 key, 2 user
	st   *localTeam
	lim  limits
	cost int64   // the TPM reservation at this level (capped at its tpm)
	held float64 // reserved by the shared limiter, still running (Admission.HeldUSD)
	// slots the shared limiter holds, still running (Admission.HeldSlots)
	heldSlots int64
	// the charge, computed before anything is written
	rNext, tNext int64
	idx, end     int64 // budget window
}

// Admit checks RPM, TPM (reserving a.Tokens), a max_parallel slot and the
// budget at every level of a together: either every dimension of every
// level is charged or none (SPEC 3.1). It never blocks on anything but the
// levels' mutexes; the error is non-nil only for an Admission without a
// team.
func (l *Local) Admit(_ context.Context, a Admission) (Decision, error) {
	if a.Team == nil {
		return Decision{}, errNoTeam
	}
	var lv [3]lvl
	n := 0
	if !Unlimited(a.Team) {
		tl := a.Team.Team.Level()
		lv[0] = lvl{kind: 0, lim: l.scaled(&tl), held: a.HeldUSD, heldSlots: a.HeldSlots} // st: looked up below
		n++
	}
	for i, s := range a.Levels {
		if s.Limits.Any() {
			lv[n] = lvl{kind: 1 + i, lim: l.scaled(s.Limits), held: s.HeldUSD, heldSlots: s.HeldSlots}
			n++
		}
	}
	if n == 0 {
		return unlimitedDecision(a), nil
	}
	levels := lv[:n]
	// look up (a lookup may sweep, which locks levels: so none is held
	// then), lock in order, and start again if a level was swept meanwhile
	for {
		for i := range levels {
			if levels[i].kind == 0 {
				levels[i].st = l.team(a.Team.Name)
			} else {
				levels[i].st = l.sub(a.Levels[levels[i].kind-1].Key)
			}
		}
		gone := false
		for i := range levels {
			levels[i].st.mu.Lock()
			gone = gone || levels[i].st.gone
		}
		if !gone {
			break
		}
		for i := range levels {
			levels[i].st.mu.Unlock()
		}
	}
	defer func() {
		for i := range levels {
			levels[i].st.mu.Unlock()
		}
	}()
	wall := l.clock().UnixNano()
	now := l.steady(wall) // TATs and slots; budgets are on wall

	var (
		wait    time.Duration
		kind    int
		level   int
		dimWait time.Duration
	)
	for i := range levels {
		v := &levels[i]
		st, lim := v.st, v.lim
		v.cost = Reservation(a.Tokens, lim.tpm)
		v.rNext, v.tNext = st.rpmTAT, st.tpmTAT
		reject := func(w time.Duration, k int) {
			if w > wait {
				wait, kind, level = w, k, v.kind
			}
		}
		if lim.rpm > 0 {
			v.rNext, dimWait = gcraCharge(st.rpmTAT, now, lim.rpm, 1)
			reject(dimWait, 1)
		}
		if lim.tpm > 0 {
			v.tNext, dimWait = gcraCharge(st.tpmTAT, now, lim.tpm, v.cost)
			reject(dimWait, 2)
		}
		// with the slots the shared limiter holds for this node's requests
		// still running: the share is the node's, theirs included
		if held := max(0, v.heldSlots); lim.parallel > 0 && int64(len(st.slots))+held >= lim.parallel {
			st.purgeLocked(now)
			if int64(len(st.slots))+held >= lim.parallel {
				reject(ParallelRetry, 3)
			}
		}
		if lim.budget > 0 {
			v.idx, v.end = PeriodWindow(wall, lim.period, st.startFor(lim.period))
			// with what the shared limiter reserved for this node's requests
			// still running: their cost is not in the local spend yet
			spent := st.spentIn(lim.period, v.idx) + max(0, v.held)
			// the request's highest possible cost is reserved: a burst against
			// a nearly spent budget admits only what the rest covers (SPEC 3.1)
			if spent >= lim.budget || spent+a.CostUSD > lim.budget+usdTolerance {
				reject(time.Duration(v.end-wall), 4)
			} else if wall < st.blockedUntil && a.CostUSD >= st.blockedFrom {
				// the shared store refused a reservation this large or smaller:
				// it does not fit the budget cluster-wide; a smaller one may,
				// and is left to this node's share
				reject(time.Duration(st.blockedUntil-wall), 4)
			}
		}
	}

	d := Decision{Allowed: kind == 0}
	if kind != 0 {
		d.Kind, d.RetryAfter, d.Level = Kinds[kind], wait, level
		for i := range levels {
			levels[i].rNext, levels[i].tNext = levels[i].st.rpmTAT, levels[i].st.tpmTAT // nothing is charged
		}
	} else {
		d.Ticket = Ticket{Team: a.Team.Name, RequestID: a.RequestID, lv: &ticketLevels{}}
		slot := ""
		for i := range levels {
			v := &levels[i]
			st, lim := v.st, v.lim
			st.rpmTAT, st.tpmTAT = v.rNext, v.tNext
			lt := levelTicket{st: st, kind: v.kind, lim: lim}
			if v.kind > 0 {
				lt.key, lt.name = a.Levels[v.kind-1].Key, a.Levels[v.kind-1].Name
				lt.thr = BudgetAlertUSD(a.Levels[v.kind-1].Limits.Budget)
			} else {
				lt.thr = BudgetAlertUSD(a.Team.Budget)
			}
			if lim.tpm > 0 {
				lt.reserved, lt.end = v.cost, v.tNext
			}
			if lim.budget > 0 {
				lt.window = v.idx
				if a.CostUSD > 0 {
					st.enter(lim.period, v.idx)
					st.spent += a.CostUSD
					st.reserved += a.CostUSD
					st.nreserved++
					lt.usd = a.CostUSD
				}
			}
			if lim.parallel > 0 {
				if slot == "" {
					slot = l.slotID()
				}
				if st.slots == nil {
					st.slots = map[string]int64{}
				}
				ttl := l.slotTTL.Load()
				if !a.Until.IsZero() {
					// a request may run past the default backstop: its
					// slot is held until its own deadline has passed
					ttl = max(ttl, a.Until.UnixNano()-wall+int64(SlotMargin))
				}
				st.slots[slot] = now + ttl
				lt.slot = true
			}
			d.Ticket.lv.l[d.Ticket.lv.n] = lt
			d.Ticket.lv.n++
		}
		d.Ticket.Slot = slot
	}
	// the headers report, per dimension, the level with the least remaining
	first := [2]bool{true, true}
	for i := range levels {
		v := &levels[i]
		if v.lim.rpm > 0 {
			rem, reset := gcraState(v.rNext, now, v.lim.rpm)
			if first[0] || rem < d.RemainingRequests {
				d.LimitRequests, d.RemainingRequests, d.ResetRequests = v.lim.rpm, rem, reset
				first[0] = false
			}
		}
		if v.lim.tpm > 0 {
			rem, reset := gcraState(v.tNext, now, v.lim.tpm)
			if first[1] || rem < d.RemainingTokens {
				d.LimitTokens, d.RemainingTokens, d.ResetTokens = v.lim.tpm, rem, reset
				first[1] = false
			}
		}
	}
	return d, nil
}

// levelTicket is one level of an admission, for Release and Reconcile.
type levelTicket struct {
	st        *localTeam
	kind      int
	key, name string // a key or user level's state key and name
	lim       limits
	thr       float64 // the budget alert's spend (undivided)
	reserved  int64   // tokens reserved against this level's TPM
	end       int64   // its TPM TAT right after the reservation (ns)
	usd       float64 // reserved against this level's budget
	window    int64
	slot      bool // holds the ticket's slot
}

// slotID names a local slot: unique per admission even when clients reuse a
// request id, so a shared id can never merge two requests into one slot.
func (l *Local) slotID() string {
	return "l" + strconv.FormatUint(l.seq.Add(1), 36)
}

// purgeLocked drops slots past their TTL backstop.
func (st *localTeam) purgeLocked(now int64) {
	for id, exp := range st.slots {
		if exp <= now {
			delete(st.slots, id)
		}
	}
}

// Release frees the ticket's slot at every level; extra calls and the zero
// Ticket are no-ops.
func (l *Local) Release(t Ticket) {
	if t.Slot == "" || t.lv == nil {
		return
	}
	for i := range t.lv.n {
		lt := &t.lv.l[i]
		if !lt.slot {
			continue
		}
		lt.st.mu.Lock()
		delete(lt.st.slots, t.Slot)
		lt.st.mu.Unlock()
	}
}

// Reconcile replaces the ticket's TPM reservation by actualTokens and adds
// costUSD to the period's spend, at every level. A refund returns at most
// what the reservation still holds (its End minus now): one that arrives
// after its reservation has decayed returns nothing (SPEC 3).
func (l *Local) Reconcile(t Ticket, actualTokens int64, costUSD float64) {
	if t.lv == nil {
		return
	}
	for i := range t.lv.n {
		lt := &t.lv.l[i]
		lim := lt.lim
		if lim.tpm <= 0 && lim.budget <= 0 {
			continue
		}
		st := lt.st
		st.mu.Lock()
		if st.gone { // swept (a level at rest): its successor takes the correction
			st.mu.Unlock()
			st = l.lockSub(lt.key)
		}
		wall := l.clock().UnixNano()
		now := l.steady(wall)
		if lim.tpm > 0 && actualTokens >= 0 {
			if delta := actualTokens - lt.reserved; delta > 0 {
				st.tpmTAT = gcraAdjust(st.tpmTAT, now, lim.tpm, delta)
			} else if delta < 0 {
				st.tpmTAT = gcraRefund(st.tpmTAT, now, interval(-delta, lim.tpm), lt.end)
			}
		}
		alert := false
		if lim.budget > 0 {
			st.reconcileSpendLocked(wall, lim.period, lt.usd, lt.window, costUSD)
			// the alert is about money spent: the reservations of requests
			// still running are not (SPEC 3.1); counted, nine requests in
			// flight against a $10 budget raised the period's one alert at
			// a real spend of cents, and the real crossing raised none
			if thr := lt.thr / float64(l.div.Load()); thr > 0 && st.spent-st.reserved >= thr && st.alerted != st.period+1 {
				st.alerted = st.period + 1
				alert = true
			}
		}
		st.mu.Unlock()
		if alert {
			if fn := l.alert.Load(); fn != nil {
				(*fn)(t.Team, lt.kind, lt.name)
			}
		}
	}
}

// reconcileSpendLocked replaces a budget reservation (usd, made in window)
// by the real cost; once that window has ended, the new one owes nothing
// for it (st.mu held).
func (st *localTeam) reconcileSpendLocked(now, code int64, usd float64, window int64, costUSD float64) {
	idx, _ := PeriodWindow(now, code, st.startFor(code))
	if usd > 0 && window != idx {
		return
	}
	if usd > 0 && st.code == code && st.period == idx && st.nreserved > 0 {
		st.nreserved--
		st.reserved = max(0, st.reserved-usd)
		if st.nreserved == 0 {
			st.reserved = 0
		}
	}
	if costUSD == usd {
		return
	}
	st.enter(code, idx)
	st.spent = max(0, st.spent+costUSD-usd)
}

// startFor is the window st's spend counts in, for a level of period
// code (0: none).
func (st *localTeam) startFor(code int64) int64 {
	if st.code == code {
		return st.period
	}
	return 0
}

// spentIn is st's spend in window idx of period code.
func (st *localTeam) spentIn(code, idx int64) float64 {
	if st.code == code && st.period == idx {
		return st.spent
	}
	return 0
}

// enter makes window idx of period code the one st's spend counts in,
// from 0 when it is a new one (a duration's window opens here).
func (st *localTeam) enter(code, idx int64) {
	if st.code != code || st.period != idx {
		st.code, st.period, st.spent = code, idx, 0
		st.reserved, st.nreserved = 0, 0
	}
}

func (st *localTeam) spendLocked(now, code int64, usd float64) {
	idx, _ := PeriodWindow(now, code, st.startFor(code))
	st.enter(code, idx)
	st.spent += usd
}
