package ratelimit

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"switchyard/catalog"
)

// errNoTeam is returned for an Admission without a team.
var errNoTeam = errors.New("ratelimit: admission without a team")

// Local is the node-local limiter: GCRA for RPM and TPM, a slot map for
// max_parallel and a spend counter for the budget, on an injected clock. It
// is the limiter when Redis is not configured, and the fallback when it is
// unreachable; then every limit is divided by the divisor
// (redis.expected_replicas) so the cluster as a whole stays near its limit.
//
// State is per team, each behind its own mutex: teams never contend.
type Local struct {
	// Immutable after construction.
	clock func() time.Time

	div     atomic.Int64 // the divisor (>= 1); SetDivisor moves it with the live node count
	slotTTL atomic.Int64 // ns; set before use
	seq     atomic.Uint64
	teams   sync.Map // team name -> *localTeam
	alert   atomic.Pointer[func(team string)]
}

// SetBudgetAlert names what is called, once per team and period, when a
// reconciled spend crosses the team's budget.alert_at (SPEC 3.1; once per
// node here: the shared limiter alerts once for the cluster).
func (l *Local) SetBudgetAlert(fn func(team string)) { l.alert.Store(&fn) }

// localTeam is one team's local state.
type localTeam struct {
	mu sync.Mutex
	// Guarded by mu.
	rpmTAT, tpmTAT int64            // ns
	slots          map[string]int64 // slot id -> expiry (ns), the TTL backstop; nil until the first
	period         int64            // budget period index of spent
	spent          float64          // USD spent in period
	blockedUntil   int64            // budget known exhausted cluster-wide until (ns)
	alerted        int64            // 1 + the budget period whose alert was raised (0: none)
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
	l := &Local{clock: clock}
	l.div.Store(int64(divisor))
	l.slotTTL.Store(int64(DefaultSlotTTL))
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

// limits are a team's limits as this node enforces them.
type limits struct {
	rpm, tpm, parallel int64
	budget             float64
	period             int64 // PeriodCode of the budget's period
}

func (l *Local) scaled(t *catalog.Team) limits {
	d := l.div.Load()
	div := func(v int64) int64 {
		if v <= 0 {
			return 0
		}
		return max(1, v/d)
	}
	return limits{
		rpm: div(t.RPM), tpm: div(t.TPM), parallel: div(t.MaxParallel),
		budget: max(0, t.Budget.USD) / float64(d), period: PeriodCode(BudgetPeriod(t)),
	}
}

func (l *Local) team(name string) *localTeam {
	if v, ok := l.teams.Load(name); ok {
		return v.(*localTeam)
	}
	v, _ := l.teams.LoadOrStore(name, &localTeam{}) // slots made by the first slot: most teams have no max_parallel
	return v.(*localTeam)
}

// Admit checks RPM, TPM (reserving a.Tokens), a max_parallel slot and the
// budget together: either every dimension is charged or none. It never
// blocks on anything but the team's mutex; the error is non-nil only for an
// Admission without a team.
func (l *Local) Admit(_ context.Context, a Admission) (Decision, error) {
	if a.Team == nil {
		return Decision{}, errNoTeam
	}
	if Unlimited(a.Team) {
		return unlimitedDecision(a), nil
	}
	lim := l.scaled(a.Team)
	cost := Reservation(a.Tokens, lim.tpm)
	st := l.team(a.Team.Name)

	st.mu.Lock()
	defer st.mu.Unlock()
	now := l.clock().UnixNano()

	var (
		wait       time.Duration
		kind       int
		rNext      = st.rpmTAT
		tNext      = st.tpmTAT
		dimWait    time.Duration
		budgetLeft time.Duration
	)
	reject := func(w time.Duration, k int) {
		if w > wait {
			wait, kind = w, k
		}
	}
	if lim.rpm > 0 {
		rNext, dimWait = gcraCharge(st.rpmTAT, now, lim.rpm, 1)
		reject(dimWait, 1)
	}
	if lim.tpm > 0 {
		tNext, dimWait = gcraCharge(st.tpmTAT, now, lim.tpm, cost)
		reject(dimWait, 2)
	}
	if lim.parallel > 0 && int64(len(st.slots)) >= lim.parallel {
		st.purgeLocked(now)
		if int64(len(st.slots)) >= lim.parallel {
			reject(ParallelRetry, 3)
		}
	}
	if lim.budget > 0 {
		idx, end := PeriodWindow(now, lim.period)
		budgetLeft = time.Duration(end - now)
		if st.period != idx {
			st.period, st.spent = idx, 0
		}
		// the request's highest possible cost is reserved: a burst against
		// a nearly spent budget admits only what the rest covers (SPEC 3.1)
		if st.spent >= lim.budget || st.spent+a.CostUSD > lim.budget+usdTolerance {
			reject(budgetLeft, 4)
		} else if now < st.blockedUntil {
			reject(time.Duration(st.blockedUntil-now), 4)
		}
	}

	d := Decision{Allowed: kind == 0, LimitRequests: lim.rpm, LimitTokens: lim.tpm}
	if kind != 0 {
		d.Kind, d.RetryAfter = Kinds[kind], wait
		rNext, tNext = st.rpmTAT, st.tpmTAT // nothing is charged
	} else {
		st.rpmTAT, st.tpmTAT = rNext, tNext
		d.Ticket = Ticket{Team: a.Team.Name, RequestID: a.RequestID, Reserved: cost, End: tNext, team: a.Team}
		if lim.budget > 0 && a.CostUSD > 0 {
			b := a.CostUSD
			st.spent += b
			d.Ticket.ReservedUSD, d.Ticket.Window = b, st.period
		}
		if lim.parallel > 0 {
			d.Ticket.Slot = l.slotID()
			if st.slots == nil {
				st.slots = map[string]int64{}
			}
			st.slots[d.Ticket.Slot] = now + l.slotTTL.Load()
		}
		if lim.tpm <= 0 {
			d.Ticket.Reserved = 0
		}
	}
	if lim.rpm > 0 {
		d.RemainingRequests, d.ResetRequests = gcraState(rNext, now, lim.rpm)
	}
	if lim.tpm > 0 {
		d.RemainingTokens, d.ResetTokens = gcraState(tNext, now, lim.tpm)
	}
	return d, nil
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

// Release frees the ticket's slot; extra calls and the zero Ticket are no-ops.
func (l *Local) Release(t Ticket) {
	if t.Slot == "" {
		return
	}
	v, ok := l.teams.Load(t.Team)
	if !ok {
		return
	}
	st := v.(*localTeam)
	st.mu.Lock()
	delete(st.slots, t.Slot)
	st.mu.Unlock()
}

// Reconcile replaces the ticket's TPM reservation by actualTokens and adds
// costUSD to the period's spend. A refund returns at most what the
// reservation still holds (its End minus now): one that arrives after its
// reservation has decayed returns nothing (SPEC 3).
func (l *Local) Reconcile(t Ticket, actualTokens int64, costUSD float64) {
	if t.team == nil || (t.team.TPM <= 0 && t.team.Budget.USD <= 0) {
		return
	}
	lim := l.scaled(t.team)
	st := l.team(t.Team)
	st.mu.Lock()
	defer st.mu.Unlock()
	now := l.clock().UnixNano()
	if lim.tpm > 0 && actualTokens >= 0 {
		if delta := actualTokens - t.Reserved; delta > 0 {
			st.tpmTAT = gcraAdjust(st.tpmTAT, now, lim.tpm, delta)
		} else if delta < 0 {
			st.tpmTAT = gcraRefund(st.tpmTAT, now, interval(-delta, lim.tpm), t.End)
		}
	}
	if lim.budget > 0 {
		st.reconcileSpendLocked(now, lim.period, t, costUSD)
		if thr := BudgetAlertUSD(t.team) / float64(l.div.Load()); st.spent >= thr && st.alerted != st.period+1 {
			st.alerted = st.period + 1
			if fn := l.alert.Load(); fn != nil {
				(*fn)(t.Team)
			}
		}
	}
}

// reconcileSpendLocked replaces the ticket's budget reservation by the real
// cost, in the window the reservation was made in; once that window has
// ended, the new one owes nothing for it (st.mu held).
func (st *localTeam) reconcileSpendLocked(now, code int64, t Ticket, costUSD float64) {
	idx, _ := PeriodWindow(now, code)
	if t.ReservedUSD > 0 && t.Window != idx {
		return
	}
	if st.period != idx {
		st.period, st.spent = idx, 0
	}
	st.spent = max(0, st.spent+costUSD-t.ReservedUSD)
}

// Spend adds usd to the team's local spend only (the shared limiter keeps
// the fallback aware of this node's share of a shared budget).
func (l *Local) Spend(t *catalog.Team, usd float64) {
	st := l.team(t.Name)
	st.mu.Lock()
	st.spendLocked(l.clock().UnixNano(), PeriodCode(BudgetPeriod(t)), usd)
	st.mu.Unlock()
}

func (st *localTeam) spendLocked(now, code int64, usd float64) {
	idx, _ := PeriodWindow(now, code)
	if st.period != idx {
		st.period, st.spent = idx, 0
	}
	st.spent += usd
}

// BlockBudget records that the shared store found the team's budget spent,
// so the fallback keeps rejecting until until (ns) even with a fresh local
// spend counter.
func (l *Local) BlockBudget(team string, until int64) {
	st := l.team(team)
	st.mu.Lock()
	if until > st.blockedUntil {
		st.blockedUntil = until
	}
	st.mu.Unlock()
}

// Resets is how far ahead of now team's local RPM and TPM TATs are: the
// local state in the unit Mirror takes, for the shared limiter to learn
// what the fallback admitted (0 for a dimension with a full bucket).
func (l *Local) Resets(team string) (rpm, tpm time.Duration) {
	v, ok := l.teams.Load(team)
	if !ok {
		return 0, 0
	}
	st := v.(*localTeam)
	now := l.clock().UnixNano()
	st.mu.Lock()
	r, t := st.rpmTAT-now, st.tpmTAT-now
	st.mu.Unlock()
	return time.Duration(max(0, r)), time.Duration(max(0, t))
}

// TeamRef is a team's state in a Local, for a caller that keeps it beside
// its own per-team record instead of looking the name up on every call
// (with 10,000 teams each lookup is a cache miss). A ref stays valid until
// Forget drops the team: it then still works, on state no longer shared
// with new lookups, so the caller forgets its ref together with the team.
type TeamRef struct{ st *localTeam }

// Forget drops team's state, for a team the catalog no longer has (SPEC
// 16: memory grows with the bounded stores only, also under team churn).
// A later lookup of the name starts from full buckets.
func (l *Local) Forget(team string) { l.teams.Delete(team) }

// Teams calls fn with the name of every team l holds state of.
func (l *Local) Teams(fn func(team string)) {
	l.teams.Range(func(k, _ any) bool {
		fn(k.(string))
		return true
	})
}

// Ref is the team's state in l, made if new.
func (l *Local) Ref(name string) TeamRef { return TeamRef{l.team(name)} }

// Mirror makes the local state ref of team t at least as full as a shared
// decision reported: requests resets after rpmReset and tokens after
// tpmReset. The shared limiter calls it after every decision Redis took, so
// a node that falls back mid-burst never admits locally what Redis already
// admitted (SPEC 9: a decision is shared or local, never both). With the
// divisor the local bucket is as full, in proportion, as the shared one.
func (l *Local) Mirror(ref TeamRef, t *catalog.Team, rpmReset, tpmReset time.Duration) {
	if rpmReset <= 0 && tpmReset <= 0 {
		return
	}
	st := ref.st
	now := l.clock().UnixNano()
	st.mu.Lock()
	if r := now + int64(rpmReset); t.RPM > 0 && r > st.rpmTAT {
		st.rpmTAT = r
	}
	if r := now + int64(tpmReset); t.TPM > 0 && r > st.tpmTAT {
		st.tpmTAT = r
	}
	st.mu.Unlock()
}
