package edge

// The key and end-user levels of a team (SPEC 3.1) in the Redis edge
// state: their keys live under the team's hash tag, so the team's one
// admission script checks and charges every level of a request together,
// and the team's writer call carries their corrections, releases and
// renewals. A level's record on a node exists only while it has writes
// pending or slots live: a million end users cost memory only while they
// are active.

import "switchyard/ratelimit"

// levelKeys are a key or user level's Redis keys.
type levelKeys struct {
	base          string // <team base>k:<id>: or <team base>u:<user>:
	tat, par, bud string
}

// newLevelKeys names level l of the team whose keys start with teamBase.
// The suffixes all have three characters, so two levels' keys never meet
// whatever their ids hold.
func newLevelKeys(teamBase string, l *Level) levelKeys {
	kind := "k:"
	if l.Kind == LevelUser {
		kind = "u:"
	}
	b := teamBase + kind + l.ID + ":"
	all := b + "tat" + b + "par" + b + "bud"
	n := len(b)
	return levelKeys{base: all[:n], tat: all[:n+3], par: all[n+3 : 2*n+6], bud: all[2*n+6:]}
}

// subCall is a key or user level of an admission in a beginLua call.
type subCall struct {
	lv   *Level
	keys levelKeys
	cost int64   // tokens reserved at this level (capped at its tpm)
	usd  float64 // reserved against its budget
}

// local is the level as the local fallback names it.
func (s *subCall) local() ratelimit.Level {
	return ratelimit.Level{Key: s.keys.base, Name: s.lv.Name, Limits: s.lv.Limits}
}

// subTicket is what Finish needs to correct one key or user level of an
// admission Redis decided.
type subTicket struct {
	lv       Level
	keys     levelKeys
	reserved int64   // tokens reserved against its TPM
	end      int64   // its TPM TAT right after the reservation (Redis µs)
	usd      float64 // reserved against its budget
	window   int64   // the budget window of that reservation
	slot     bool    // holds the admission's slot
	held     bool    // usd is in its team's heldSpend (teamState.hold)
}

// subWrite is what one Finish adds to a level's pending writes.
type subWrite struct {
	lv    Level
	keys  levelKeys
	slot  string  // release
	delta int64   // actual - reserved tokens
	end   int64   // the reservation's end (bounds a refund)
	usd   float64 // the real cost minus the reservation (< 0: a refund)
	spent bool    // the request spent at this level's budget: check its alert
	held  int64   // the reservation (nano-USD) to take out of the team's heldSpend (0: none)
	// settled is the budget reservation this finish settles in Redis (its
	// window still open; 0: none): the budget hash's outstanding
	// reservations drop by it (finishLua)
	settled float64
}

// levelState is a key or user level's pending writes on this node, held
// by its team's record (guarded by the team's mu).
type levelState struct {
	lv   Level
	keys levelKeys
	pendingWrites
	live map[string]struct{}
}

// levelBatch is a level's part of a batch.
type levelBatch struct {
	lv   Level
	keys levelKeys
	pendingWrites
	renew []string
}

// maxLevels bounds the key and user levels with writes pending per team,
// and maxNodeLevels those of all teams together (writer.levels): a Redis
// outage with a million end users with budgets must not grow a node
// without bound (SPEC 9, 16). A level's record and its part of a batch
// in flight are about 400 bytes, so the node's are at most about 40 MB.
// Past either bound a new level's writes are dropped and counted
// (switchyard_edge_dropped_total{kind="levels"}), and its slots freed by
// their lease; the team's own writes, its usage rows and the levels
// already held stay exact.
const (
	maxLevels     = 50_000
	maxNodeLevels = 100_000
)

// addRefund folds an unused reservation into refunds, bounded by
// maxRefunds: merged into the newest past it, with the earlier end, so the
// merge never returns capacity one of its reservations no longer holds.
func addRefund(refunds []refund, tokens, end int64) []refund {
	if len(refunds) >= maxRefunds {
		last := &refunds[len(refunds)-1]
		last.tokens += tokens
		last.end = min(last.end, end)
		return refunds
	}
	return append(refunds, refund{tokens: tokens, end: end})
}

// pendingWrites is what finished requests leave for the writer at one
// level (the team, or one of its keys or end users): held by teamState
// and levelState, taken whole into batch and levelBatch.
type pendingWrites struct {
	charge   int64    // tokens to add to the TPM TAT
	refunds  []refund // bounded refunds not yet sent
	usd      float64  // budget spend not yet sent
	settled  float64  // budget reservations settled, not yet sent (subWrite.settled)
	alert    bool     // a spend to check against the budget alert
	releases []string // slot ids to remove
}

// fold adds one finish's part: a slot to release, the tokens used past
// (or short of) the reservation that ended at end, the budget spend, the
// budget reservation it settles, and whether the spend is to be checked
// against the alert. It reports whether the oldest release was dropped to
// keep maxReleases (its lease frees it).
func (p *pendingWrites) fold(slot string, delta, end int64, usd, settled float64, spent bool) (dropped bool) {
	if slot != "" {
		if len(p.releases) >= maxReleases {
			p.releases, dropped = p.releases[1:], true // the oldest: its lease runs out first
		}
		p.releases = append(p.releases, slot)
	}
	if delta > 0 {
		p.charge += delta
	} else if delta < 0 {
		p.refunds = addRefund(p.refunds, -delta, end)
	}
	p.usd += usd
	p.settled += settled
	p.alert = p.alert || spent
	return dropped
}

// pending reports whether p holds writes not yet taken into a batch.
func (p *pendingWrites) pending() bool {
	return p.charge != 0 || len(p.refunds) > 0 || p.usd != 0 || p.settled != 0 || len(p.releases) > 0 || p.alert
}

// take moves p's writes out, at most maxBatchItems releases (the rest wait
// for the next batch).
func (p *pendingWrites) take() pendingWrites {
	out := *p
	*p = pendingWrites{}
	if n := len(out.releases); n > maxBatchItems {
		out.releases, p.releases = out.releases[:maxBatchItems:maxBatchItems], out.releases[maxBatchItems:]
	}
	return out
}

// take moves ls's pending writes into a batch part; renew adds its live
// slots.
func (ls *levelState) take(renew bool) levelBatch {
	b := levelBatch{lv: ls.lv, keys: ls.keys, pendingWrites: ls.pendingWrites.take()}
	if renew && len(ls.live) > 0 {
		b.renew = make([]string, 0, len(ls.live))
		for id := range ls.live {
			b.renew = append(b.renew, id)
		}
	}
	return b
}

// empty reports whether the part carries nothing.
func (b *levelBatch) empty() bool {
	return !b.pending() && len(b.renew) == 0
}

// args appends the part's level arguments of finishLua.
func (b *levelBatch) args(args []any) []any {
	l := b.lv.Limits
	thr := 0.0
	if b.alert || b.usd != 0 {
		thr = ratelimit.BudgetAlertUSD(l.Budget)
	}
	args = append(args, max(0, l.TPM), b.charge, b.usd, ratelimit.PeriodCode(ratelimit.BudgetPeriod(l.Budget)), thr, b.settled)
	args = append(args, len(b.refunds))
	for _, r := range b.refunds {
		args = append(args, r.tokens, r.end)
	}
	args = append(args, len(b.releases))
	for _, id := range b.releases {
		args = append(args, id)
	}
	args = append(args, len(b.renew))
	for _, id := range b.renew {
		args = append(args, id)
	}
	return args
}

// budgetCode is a level's budget period code.
func budgetCode(l *Level) int64 { return ratelimit.PeriodCode(ratelimit.BudgetPeriod(l.Limits.Budget)) }
