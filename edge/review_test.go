package edge

import (
	"fmt"
	"testing"
	"time"

	"switchyard/config"
	"switchyard/internal/teamtest"
)

// The reproductions of issue 30's review findings 5, 6, 7 and 9, each
// failing on the code the review read.

// Finding 5: a post-response call whose part for one team Redis rejected
// was marked applied before its commands ran, so the resend was a no-op
// and the other teams' writes after the failing one were lost, with nothing
// logged. Now each team's part is applied on its own: the others land, the
// failing team is reported (logged and counted by the node) and the writer
// is not left resending it.
func TestWriteRejectedForOneTeamKeepsTheOthers(t *testing.T) {
	for _, oneShard := range []bool{true, false} {
		t.Run(fmt.Sprintf("oneShard=%v", oneShard), func(t *testing.T) {
			g := newMiniRig(t, Config{OneShard: oneShard}, false)
			// t1's usage hash is a string: every HINCRBY on it fails (WRONGTYPE)
			if err := g.m.Set("sy:{team:t1}:usage", "not a hash"); err != nil {
				t.Fatal(err)
			}
			for i := range 3 {
				tm := teamtest.Team(fmt.Sprintf("t%d", i), teamtest.Limits{TPM: 100_000, USD: 100, Period: 24 * time.Hour})
				b := begin(t, g.r, tm, 10)
				g.r.Finish(&b, &Outcome{Served: true, Deployment: "d", PromptTokens: 4, CompletionTokens: 2, CostUSD: 0.5})
			}
			g.step(t)                    // starts the usage rows' wait
			g.advance(defaultUsageEvery) // usage rows are held this long
			if !g.step(t) {
				t.Fatal("the call failed as a whole")
			}
			for _, tm := range []string{"t0", "t2"} {
				if got := g.m.HGet("sy:{team:"+tm+"}:usage", "d|tok"); got != "6" {
					t.Errorf("team %s: %q tokens in Redis, want 6 (lost with another team's failure)", tm, got)
				}
			}
			g.obs.mu.Lock()
			errs := fmt.Sprint(g.obs.writeErrs)
			g.obs.mu.Unlock()
			if errs != "[t1]" {
				t.Errorf("write errors reported for %s, want [t1]", errs)
			}
			g.step(t)
			if !g.r.w.empty() || g.r.w.inflight != nil {
				t.Error("the rejected part is still pending: it would be resent forever")
			}
		})
	}
}

// Finding 6: only 1,000 live slots of a team were renewed per round, so
// with 2,500 running requests leases expired and more were admitted than
// max_parallel. Now every live slot is renewed.
func TestEveryLiveSlotRenewed(t *testing.T) {
	lease := 30 * time.Second
	g := newMiniRig(t, Config{SlotLease: lease}, false)
	const par = 2500
	team := teamtest.Team("wide", teamtest.Limits{Par: par})
	for i := range par {
		if b := begin(t, g.r, team, 0); !b.Decision.Allowed {
			t.Fatalf("admission %d refused: %+v", i, b.Decision)
		}
	}
	for range 7 { // over two leases, renewing every third of one
		g.advance(lease / 3)
		if !g.step(t) {
			t.Fatal("writer step failed")
		}
	}
	if b := begin(t, g.r, team, 0); b.Decision.Allowed {
		t.Fatalf("request %d admitted at max_parallel %d: a running request's lease expired", par+1, par)
	}
}

// Finding 7: refunds merged under a backlog took the later end of the two,
// so the merged refund could give back capacity that one of them no longer
// held (4,400 tokens past their reservation's end). The merge keeps the
// earlier end.
func TestMergedRefundKeepsTheEarlierEnd(t *testing.T) {
	g := newMiniRig(t, Config{}, false)
	team := teamtest.Team("r", teamtest.Limits{TPM: 100_000})
	ts := g.r.team(team)
	for i := range maxRefunds {
		ts.add(team, &finishWrite{delta: -10, end: int64(1_000 + i)}, g.r.w, 10)
	}
	ts.add(team, &finishWrite{delta: -10, end: 5_000_000}, g.r.w, 10)
	last := ts.refunds[len(ts.refunds)-1]
	if last.tokens != 20 || last.end != int64(1_000+maxRefunds-1) {
		t.Fatalf("merged refund %+v, want 20 tokens bounded by the earlier end %d", last, 1_000+maxRefunds-1)
	}
}

// Finding 9: when Redis's answer to an admission was lost and the local
// fallback then refused, the slot the script had taken in Redis was never
// released: the team lost it for a whole lease. Now it is released.
func TestLostAnswerRefusedLocallyReleasesTheSlot(t *testing.T) {
	g := newMiniRig(t, Config{Divisor: 2}, false)
	lc := &lossyClient{Client: g.c}
	g.r.c = lc
	team := teamtest.Team("lost", teamtest.Limits{Par: 2}) // local share: 1
	g.up.down.Store(true)                                  // breaker open: the local fallback admits
	held := begin(t, g.r, team, 0)
	if !held.Decision.Allowed {
		t.Fatal("local admission refused")
	}
	g.up.down.Store(false)
	lc.lose.Store(true) // the script runs and takes a slot; its answer is lost
	b := begin(t, g.r, team, 0)
	lc.lose.Store(false)
	if b.Decision.Allowed {
		t.Fatalf("the local fallback should refuse: its one slot is held (%+v local=%v)", b.Decision, b.Local)
	}
	// the script also put the slot of the local admission, which still
	// runs, in Redis (localSlots)
	local := g.r.node + ":" + held.t.lt.Slot
	if z := mustZ(t, g.m, "sy:{team:lost}:par"); len(z) != 2 {
		t.Fatalf("slots in Redis before the writer ran: %v, want the one the lost call took and %s", z, local)
	}
	g.step(t)
	if z := mustZ(t, g.m, "sy:{team:lost}:par"); len(z) != 1 || z[0] != local {
		t.Fatalf("slots in Redis %v, want only %s: the slot taken by the lost call is still held", z, local)
	}
	g.r.Finish(&held, &Outcome{})
	g.step(t)
	if g.m.Exists("sy:{team:lost}:par") && len(mustZ(t, g.m, "sy:{team:lost}:par")) != 0 {
		t.Fatal("a slot is still held once every request ended")
	}
}

// A key or user level whose finish carries nothing to send (its
// reservation matched the use) was kept in the team's record, never
// visited by the writer and never evicted: with 100,000 end users the
// record filled maxLevels with idle levels, and then every level with a
// real charge was dropped (switchyard_edge_dropped_total{kind="levels"}
// rose by thousands a second). An idle level is not kept; one with a
// charge still is, until the writer sends it.
func TestIdleLevelsAreNotKept(t *testing.T) {
	g := newMiniRig(t, Config{}, false)
	team := teamtest.Team("u", teamtest.Limits{TPM: 100_000})
	ts := g.r.team(team)
	lim := &config.Limits{TPM: 1_000}
	for i := range maxLevels + 10 {
		lv := Level{Kind: LevelUser, ID: fmt.Sprint("u", i), Limits: lim}
		w := &finishWrite{nsub: 1}
		w.subs[0] = subWrite{lv: lv, keys: newLevelKeys(ts.keys.base(), &lv)}
		ts.add(team, w, g.r.w, 10)
	}
	if n := len(ts.subs); n != 0 {
		t.Fatalf("%d idle levels kept", n)
	}
	lv := Level{Kind: LevelUser, ID: "charged", Limits: lim}
	w := &finishWrite{nsub: 1}
	w.subs[0] = subWrite{lv: lv, keys: newLevelKeys(ts.keys.base(), &lv), delta: 5}
	ts.add(team, w, g.r.w, 10)
	if ls := ts.subs[w.subs[0].keys.base]; ls == nil || ls.charge != 5 || !ts.subDirty {
		t.Fatalf("a level with a charge was not kept for the writer: %+v", ls)
	}
}
