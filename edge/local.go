package edge

import (
	"context"
	"time"

	"switchyard/ratelimit"
	"switchyard/sessions"
	"switchyard/telemetry"
)

// Local is the edge state of a node without Redis (the embedded default):
// the node-local limiter with the whole team limits, the node-local pin
// store and the in-memory audit ring. Nothing is written in the background.
type Local struct {
	// Immutable after construction.
	lim   *ratelimit.Local
	pins  *sessions.Local
	ring  *telemetry.Ring
	book  *Book // usage by level (SPEC 3.1)
	clock func() time.Time
}

// NewLocal returns a local edge state on clock (nil: time.Now) storing audit
// entries in ring (nil: a ring of one).
func NewLocal(clock func() time.Time, ring *telemetry.Ring) *Local {
	if ring == nil {
		ring = telemetry.NewRing(1)
	}
	if clock == nil {
		clock = time.Now
	}
	return &Local{lim: ratelimit.NewLocal(clock, 1), pins: sessions.NewLocal(clock, sessions.DefaultMaxEntries*10), ring: ring,
		book: NewBook(), clock: clock}
}

// SetBudgetAlert implements State.
func (l *Local) SetBudgetAlert(fn BudgetAlert) { l.lim.SetBudgetAlert(localAlert(fn)) }

// TeamNames implements State: every team the local limiter or the usage
// book holds state of.
func (l *Local) TeamNames(fn func(team string)) {
	l.lim.Teams(fn)
	l.book.teamNames(fn)
}

// ForgetTeams implements State: it drops the limiter state and the usage
// rows of the teams drop names.
func (l *Local) ForgetTeams(drop func(team string) bool) {
	l.lim.Teams(func(n string) {
		if drop(n) {
			l.lim.Forget(n)
		}
	})
	l.book.teamNames(func(n string) {
		if drop(n) {
			l.book.forget(n)
		}
	})
}

// Begin implements State.
func (l *Local) Begin(ctx context.Context, q *Request) (Begun, error) {
	if q.Team == nil {
		return Begun{}, errNoTeam
	}
	b := Begun{q: q.Pins, team: q.Team, tokens: q.Tokens, Decision: ratelimit.Decision{Allowed: true}, Local: true, levels: q.levelsLimited()}
	if q.Pins.Coalesce {
		b.Coalesce = CoalesceLead // no other node: the node's own requests coalesce in process (SPEC 18)
	}
	if s := q.Pins.Session; s != "" {
		if a := q.Pins.TierAlias; a != "" {
			b.Pins.Tier, _, _ = l.pins.GetTier(ctx, tierPinKey(s, a))
		}
		for i, m := range q.Pins.Models {
			if m != "" {
				b.Pins.Deps[i], _, _ = l.pins.GetTier(ctx, depPinKey(s, m))
			}
		}
	}
	if !q.limited() {
		return b, nil
	}
	a := ratelimit.Admission{RequestID: q.RequestID, Team: q.Team, Tokens: q.Tokens, CostUSD: q.CostUSD, Until: q.Deadline}
	for j, lv := range [2]*Level{&q.Key, &q.User} {
		if lv.limited() {
			a.Levels[j] = ratelimit.Level{Key: localLevelKey(q.Team.Name, lv), Name: lv.Name, Limits: lv.Limits}
		}
	}
	b.lv = levelsOf(q)
	d, err := l.lim.Admit(ctx, a)
	if err != nil {
		return b, err
	}
	if d.Allowed {
		b.t = ticket{admitted: true, local: true, lt: d.Ticket}
	}
	d.Ticket = ratelimit.Ticket{}
	b.Decision = d
	return b, nil
}

// Finish implements State.
func (l *Local) Finish(b *Begun, o *Outcome) {
	if b.t.admitted {
		actual := int64(0)
		if o.Served {
			actual = int64(o.PromptTokens + o.CompletionTokens)
		}
		cost := 0.0
		if o.Served {
			cost = o.CostUSD
		}
		if !b.t.released {
			l.lim.Release(b.t.lt)
		}
		l.lim.Reconcile(b.t.lt, actual, cost)
	}
	if s := b.q.Session; s != "" && b.team != nil {
		if o.TierPin != "" && b.q.TierAlias != "" {
			_ = l.pins.SetTier(context.Background(), tierPinKey(s, b.q.TierAlias), o.TierPin, o.TierTTL)
		}
		if o.DepPin != "" && o.DepModel != "" {
			_ = l.pins.SetTier(context.Background(), depPinKey(s, o.DepModel), o.DepPin, o.DepTTL)
		}
	}
	if b.team != nil {
		if k, s, ok := rowOf(o, l.clock()); ok {
			l.book.add(b.team.Name, k, &s)
		}
	}
	if o.Audit != nil {
		l.ring.Record(o.Audit)
	}
}

// Release implements State: the local slot is free at once.
func (l *Local) Release(_ context.Context, b *Begun) {
	if b.t.admitted && !b.t.released {
		l.lim.Release(b.t.lt)
		b.t.released = true
	}
}

// Await implements State: a local node has no lease to follow.
func (l *Local) Await(context.Context, *Begun) (string, error) { return "", ErrNotFollowing }

// Shared implements State: a local node never shares.
func (l *Local) Shared() bool { return false }

// Close implements State; nothing is pending.
func (l *Local) Close(context.Context) error { return nil }

var _ State = (*Local)(nil)

// localLevelKey names a key or user level in the local limiter.
func localLevelKey(team string, lv *Level) string {
	return team + "\x00" + lv.Kind.String() + "\x00" + lv.ID
}
