package ratelimit

// What the shared (Redis) limiter tells the local fallback while Redis
// answers, so the fallback starts from the cluster's state when it is
// gone (SPEC 9): this node's share of budget spend, budgets found spent,
// the TATs Redis returned (Mirror); and what the fallback admitted, for
// the shared limiter to carry back (Resets).

import (
	"time"

	"switchyard/catalog"
)

// Spend adds usd to the local spend of the level (team t's own when lv
// is nil) only (the shared limiter keeps the fallback aware of this node's
// share of a shared budget). A key or user level without live state gets
// none: its spend is kept at rest, compact (the shared limiter calls this
// on every served request's finish, for every end user).
func (l *Local) Spend(t *catalog.Team, lv *Level, usd float64) {
	now := l.clock().UnixNano()
	if lv == nil {
		st := l.team(t.Name)
		st.mu.Lock()
		st.spendLocked(now, PeriodCode(BudgetPeriod(t.Budget)), usd)
		st.mu.Unlock()
		return
	}
	code := PeriodCode(BudgetPeriod(lv.Limits.Budget))
	for {
		if st := l.lockSubIfAny(lv.Key); st != nil {
			st.spendLocked(now, code, usd)
			st.mu.Unlock()
			return
		}
		sh, h := l.rest.shard(lv.Key)
		sh.mu.Lock()
		if _, live := l.subs.Load(lv.Key); live { // made since: spend there
			sh.mu.Unlock()
			continue
		}
		rec, _ := l.rest.takeLocked(sh, h)
		l.rest.putLocked(sh, h, rec.spend(now, code, usd))
		sh.mu.Unlock()
		if l.rest.n.Load()+l.rest.nb.Load() >= l.restAt.Load() {
			l.startSweep()
		}
		return
	}
}

// BlockBudget records that the shared store refused a reservation of from
// USD for the level's budget (a team's by name, or a key or user level's
// by Level.Key when sub is set): it does not fit cluster-wide, so until
// until (ns) the fallback refuses every reservation at least that large,
// even with a fresh local spend counter; a smaller one may still fit and
// is left to the fallback's share (from 0: the budget is spent, every
// request is refused). Blocks of one period keep the smallest from; a
// block that has ended is replaced. A key or user level without live
// state gets none: its block is kept at rest, compact, as its spend is
// (Spend).
func (l *Local) BlockBudget(name string, sub bool, until int64, from float64) {
	b := restBlock{until: until, from: max(0, from)}
	now := l.clock().UnixNano()
	if !sub {
		st := l.team(name)
		st.mu.Lock()
		st.blockLocked(b, now)
		st.mu.Unlock()
		return
	}
	for {
		if st := l.lockSubIfAny(name); st != nil {
			st.blockLocked(b, now)
			st.mu.Unlock()
			return
		}
		sh, h := l.rest.shard(name)
		sh.mu.Lock()
		if _, live := l.subs.Load(name); live { // made since: block there
			sh.mu.Unlock()
			continue
		}
		l.rest.putBlockLocked(sh, h, b, now)
		sh.mu.Unlock()
		if l.rest.n.Load()+l.rest.nb.Load() >= l.restAt.Load() {
			l.startSweep()
		}
		return
	}
}

// blockLocked adds block b to st at now (st.mu held).
func (st *localTeam) blockLocked(b restBlock, now int64) {
	m := restBlock{until: st.blockedUntil, from: st.blockedFrom}.merge(b, now)
	st.blockedUntil, st.blockedFrom = m.until, m.from
}

// Resets is how far ahead of now team's local RPM and TPM TATs are: the
// local state in the unit Mirror takes, for the shared limiter to learn
// what the fallback admitted (0 for a dimension with a full bucket).
func (l *Local) Resets(team string) (rpm, tpm time.Duration) {
	st, ok := l.teams.Load(team)
	if !ok {
		return 0, 0
	}
	return l.resets(st)
}

// SubResets is Resets for a key or user level (Level.Key).
func (l *Local) SubResets(key string) (rpm, tpm time.Duration) {
	st, ok := l.subs.Load(key)
	if !ok {
		return 0, 0
	}
	return l.resets(st)
}

func (l *Local) resets(st *localTeam) (rpm, tpm time.Duration) {
	now := l.steady(l.clock().UnixNano())
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
	l.teams.Range(func(name string, _ *localTeam) { fn(name) })
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
	ref.st.mu.Lock()
	mirrorLocked(ref.st, l.steady(l.clock().UnixNano()), t.RPM > 0, t.TPM > 0, rpmReset, tpmReset)
	ref.st.mu.Unlock()
}

// MirrorSub is Mirror for a key or user level. Resets within tolerance
// make no state for a level that has none: they are below the resolution
// of the shared answer (whole µs, rounded up) and within the GCRA's own
// tolerance, so a bucket that full counts as full; a level with state
// still learns them. Otherwise every admission of a level far from its
// limits (100,000 keys, a million end users) made a record the next sweep
// dropped unchanged (SPEC 16: cost stays flat as the levels grow).
func (l *Local) MirrorSub(lv Level, rpmReset, tpmReset time.Duration) {
	if !lv.Limits.Any() || (rpmReset <= 0 && tpmReset <= 0) {
		return
	}
	var st *localTeam
	if rpmReset <= time.Duration(tolerance) && tpmReset <= time.Duration(tolerance) {
		if st = l.lockSubIfAny(lv.Key); st == nil {
			return
		}
	} else {
		st = l.lockSub(lv.Key)
	}
	defer st.mu.Unlock()
	mirrorLocked(st, l.steady(l.clock().UnixNano()), lv.Limits.RPM > 0, lv.Limits.TPM > 0, rpmReset, tpmReset)
}

// mirrorLocked moves st's TATs to at least now + the resets (st.mu held).
func mirrorLocked(st *localTeam, now int64, rpm, tpm bool, rpmReset, tpmReset time.Duration) {
	if r := now + int64(rpmReset); rpm && r > st.rpmTAT {
		st.rpmTAT = r
	}
	if r := now + int64(tpmReset); tpm && r > st.tpmTAT {
		st.tpmTAT = r
	}
}
