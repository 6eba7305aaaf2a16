package edge

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"switchyard/catalog"
	"switchyard/internal/teamtest"
	"switchyard/telemetry"
)

// TestUsage: the usage read agrees between the local state and the Redis
// script, through admissions, a reconcile with spend, a release and refill.
func TestUsage(t *testing.T) {
	for _, impl := range []struct {
		name   string
		env    func(*testing.T) env
		shared bool
	}{{"local", localEnv, false}, {"redis", miniEnv, true}} {
		t.Run(impl.name, func(t *testing.T) {
			e := impl.env(t)
			team := teamtest.Team("u", teamtest.Limits{RPM: 60, TPM: 6000, Par: 5, USD: 10, Period: time.Hour})
			read := func(step string, rpm, tpm, inflight int64, spent float64) {
				t.Helper()
				// a duration's window opens with the first spend: none before
				u, err := e.st.Usage(context.Background(), team)
				if err != nil {
					t.Fatal(err)
				}
				if u.Shared != impl.shared || u.RPMUsed != rpm || u.TPMUsed != tpm || u.InFlight != inflight || math.Abs(u.SpentUSD-spent) > 1e-9 || u.ResetsAt.IsZero() != (spent == 0) {
					t.Fatalf("%s: %+v, want rpm %d tpm %d in flight %d spent %g", step, u, rpm, tpm, inflight, spent)
				}
			}
			read("fresh", 0, 0, 0, 0)
			var bs []Begun
			for range 3 {
				bs = append(bs, begin(t, e.st, team, 100))
			}
			read("admitted", 3, 300, 3, 0)
			e.st.Finish(&bs[0], &Outcome{Served: true, PromptTokens: 50, CostUSD: 0.5})
			e.settle(t)
			read("reconciled", 3, 250, 2, 0.5)
			e.advance(time.Second) // rpm 60: one request back; tpm 6000: 100 tokens back
			read("refilled", 2, 150, 2, 0.5)
			e.check(t)
		})
	}
}

// TestUsageTTLRenewedDaily: a team's usage hash gets its TTL with its first
// write and has it renewed once a day, not with every flush (an EXPIRE per
// team per flush was one Redis write per request with 10,000 teams).
func TestUsageTTLRenewedDaily(t *testing.T) {
	g := newMiniRig(t, Config{}, false)
	team := teamtest.Team("u", teamtest.Limits{})
	const key = "sy:{team:u}:usage"
	serve := func(dep string) {
		b := begin(t, g.r, team, 10)
		g.r.Finish(&b, &Outcome{Served: true, Deployment: dep, PromptTokens: 7, CompletionTokens: 3})
		if !g.step(t) { // the usage row waits (writer.dueUsage)...
			t.Fatal("writer step failed")
		}
		g.advance(defaultUsageEvery)
		if !g.step(t) { // ...and goes out once due
			t.Fatal("writer step failed")
		}
	}
	serve("d0")
	if got := g.m.TTL(key); got != usageTTL {
		t.Fatalf("TTL after the first write %v, want %v", got, usageTTL)
	}
	g.m.SetTTL(key, time.Hour)
	g.advance(time.Hour / 2)
	serve("d0")
	if got := g.m.TTL(key); got != time.Hour {
		t.Fatalf("TTL renewed within the day: %v", got)
	}
	serve("d1") // a deployment new to the hash sets it at once
	if got := g.m.TTL(key); got != usageTTL {
		t.Fatalf("TTL after a new field %v, want %v", got, usageTTL)
	}
	g.m.SetTTL(key, time.Hour)
	g.advance(usageRefresh)
	serve("d0")
	if got := g.m.TTL(key); got != usageTTL {
		t.Fatalf("TTL a day later %v, want %v renewed", got, usageTTL)
	}
	if got := g.m.HGet(key, "d0|req"); got != "3" {
		t.Fatalf("d0 requests %s, want 3", got)
	}
}

func TestTeamKeys(t *testing.T) {
	k := newTeamKeys("sy:", "acme", "n1")
	want := []string{"sy:{team:acme}:", "sy:{team:acme}:tat", "sy:{team:acme}:par", "sy:{team:acme}:budget",
		"sy:{team:acme}:usage", "sy:{team:acme}:applied:n1"}
	b := k.begin()
	got := append(append([]string{k.base()}, b[:]...), k.usage(), k.mark())
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("keys %q\nwant %q", got, want)
	}
}

// servePinned is one served request of team in session "s" on deployment
// d0 of model "m" (7 + 3 tokens), pinning the session to pin.
func servePinned(t *testing.T, r *Redis, team *catalog.Team, pin string) {
	t.Helper()
	b, err := r.Begin(context.Background(), &Request{RequestID: "r", Team: team, Tokens: 10, Pins: PinQuery{Session: "s", Models: [2]string{"m"}}})
	if err != nil {
		t.Fatal(err)
	}
	r.Finish(&b, &Outcome{Served: true, Deployment: "d0", PromptTokens: 7, CompletionTokens: 3, DepModel: "m", DepPin: pin, DepTTL: time.Hour})
}

// TestUsageWaitsForItsInterval: a team's usage rows wait usageEvery before
// they are written, summed, in one write, while its pins (and every other
// write) go out with the next flush; a team whose only pending write is
// waiting usage is not taken again every flush; and close writes what still
// waits. Before the rows waited, each flush wrote them: with 10,000 teams
// serving now and then, two HINCRBY per request.
func TestUsageWaitsForItsInterval(t *testing.T) {
	g := newMiniRig(t, Config{UsageEvery: 5 * time.Second}, false)
	team := teamtest.Team("u", teamtest.Limits{})
	const key = "sy:{team:u}:usage"
	serve := func(pin string) {
		servePinned(t, g.r, team, pin)
		if !g.step(t) {
			t.Fatal("writer step failed")
		}
	}
	for i := range 4 {
		serve(fmt.Sprintf("p%d", i))
		if got := g.m.HGet(key, "d0|req"); got != "" {
			t.Fatalf("after %d requests in %v the usage is written already (%s requests)", i+1, time.Duration(i)*time.Second, got)
		}
		if got, _ := g.m.Get("sy:{team:u}:pd:s|m"); got != fmt.Sprintf("p%d", i) {
			t.Fatalf("pin %q after request %d: pins must not wait", got, i+1)
		}
		g.advance(time.Second)
	}
	g.r.w.dmu.Lock()
	queued := len(g.r.w.dirty)
	g.r.w.dmu.Unlock()
	if queued != 0 {
		t.Fatalf("%d teams queued again with nothing but waiting usage", queued)
	}
	g.advance(time.Second) // 5 s after the first row
	if !g.step(t) {
		t.Fatal("writer step failed")
	}
	if got, tok := g.m.HGet(key, "d0|req"), g.m.HGet(key, "d0|tok"); got != "4" || tok != "40" {
		t.Fatalf("usage once due: %s requests, %s tokens; want 4 and 40", got, tok)
	}
	serve("p9")
	if err := g.r.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := g.m.HGet(key, "d0|req"); got != "5" {
		t.Fatalf("usage after close %s requests, want 5: close writes the usage still waiting", got)
	}
}

// TestUsageOnlyFinishLeavesTheWriterAlone: once a team's usage rows wait
// in the writer's held list, a request whose only write is another usage
// row does not queue the team for the writer (each visit was a lock and a
// batch per request with 10,000 teams); the rows still all arrive, summed,
// when due. A request with something else to send (here a pin) still
// queues it.
func TestUsageOnlyFinishLeavesTheWriterAlone(t *testing.T) {
	g := newMiniRig(t, Config{UsageEvery: 5 * time.Second}, false)
	team := teamtest.Team("u", teamtest.Limits{})
	const key = "sy:{team:u}:usage"
	queued := func() int {
		g.r.w.dmu.Lock()
		defer g.r.w.dmu.Unlock()
		return len(g.r.w.dirty)
	}
	servePinned(t, g.r, team, "")
	if queued() != 1 {
		t.Fatalf("the first usage row queued %d teams, want 1 (the writer starts its wait)", queued())
	}
	if !g.step(t) {
		t.Fatal("writer step failed")
	}
	for i := range 3 {
		servePinned(t, g.r, team, "")
		if n := queued(); n != 0 {
			t.Fatalf("usage-only request %d queued %d teams while the team's rows wait", i+2, n)
		}
		g.advance(time.Second)
	}
	servePinned(t, g.r, team, "p")
	if queued() != 1 {
		t.Fatalf("a request with a pin to write queued %d teams, want 1", queued())
	}
	if !g.step(t) {
		t.Fatal("writer step failed")
	}
	if got := g.m.HGet(key, "d0|req"); got != "" {
		t.Fatalf("usage written before it was due (%s requests)", got)
	}
	g.advance(2 * time.Second) // 5 s after the first row
	if !g.step(t) {
		t.Fatal("writer step failed")
	}
	if got, tok := g.m.HGet(key, "d0|req"), g.m.HGet(key, "d0|tok"); got != "5" || tok != "50" {
		t.Fatalf("usage once due: %s requests, %s tokens; want 5 and 50", got, tok)
	}
}

// TestDueUsageBehindABatchInFlight: usage that comes due while the team's
// previous batch waits to be resent (its reply was lost) goes out in the
// flush after the resend, without another request of the team: released
// from w.held, the team is no longer "holding", so the resend's settle
// queues it again.
func TestDueUsageBehindABatchInFlight(t *testing.T) {
	g := newMiniRig(t, Config{UsageEvery: 5 * time.Second}, false)
	lc := &lossyClient{Client: g.c}
	g.r.c = lc
	team := teamtest.Team("u", teamtest.Limits{})
	const key = "sy:{team:u}:usage"
	serve := func(pin string) { servePinned(t, g.r, team, pin) }
	serve("p0")
	if !g.step(t) { // the pin goes out, the usage row starts its wait
		t.Fatal("writer step failed")
	}
	g.advance(time.Second)
	serve("p1")
	lc.lose.Store(true)
	if g.step(t) { // the pin p1's batch: applied, its reply lost
		t.Fatal("a lost reply reported success")
	}
	lc.lose.Store(false)
	g.advance(5 * time.Second) // the usage is due now, behind the batch in flight
	g.step(t)                  // resends the batch in flight, as it was: without the usage
	if got := g.m.HGet(key, "d0|req"); got != "" {
		t.Fatalf("usage %q requests in the resent batch, which was built before it was due", got)
	}
	g.step(t)
	if got := g.m.HGet(key, "d0|req"); got != "2" {
		t.Fatalf("usage %q requests after the resend and one more flush, want 2", got)
	}
}

// roundClient counts the writer's rounds (one pipeline each).
type roundClient struct {
	Client
	rounds atomic.Int32
}

func (c *roundClient) Pipelined(ctx context.Context, fn func(redis.Pipeliner) error) ([]redis.Cmder, error) {
	c.rounds.Add(1)
	return c.Client.Pipelined(ctx, fn)
}

// TestCloseGivesUpOnADeadRedis: a node stopping while Redis is unreachable
// makes closeRounds failed rounds and returns, naming what is lost, long
// before its shutdown budget ends. Before, it retried every 50 ms until the
// budget (30 s in serve) ran out.
func TestCloseGivesUpOnADeadRedis(t *testing.T) {
	g := newMiniRig(t, Config{}, true)
	rc := &roundClient{Client: g.c}
	g.r.c = rc
	team := teamtest.Team("gone", teamtest.Limits{RPM: 10, TPM: 1000})
	b := begin(t, g.r, team, 100)
	g.r.Finish(&b, &Outcome{Served: true, Deployment: "d0", PromptTokens: 7, CompletionTokens: 3, Audit: &telemetry.Entry{RequestID: "r1", Team: "gone"}})
	g.m.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := g.r.Close(ctx)
	if err == nil || ctx.Err() != nil {
		t.Fatalf("close = %v with the budget %v: want an error before the budget ends", err, ctx.Err())
	}
	if n := rc.rounds.Load(); n != closeRounds {
		t.Fatalf("%d rounds, want %d", n, closeRounds)
	}
	for _, want := range []string{"1 teams", "1 audit entries"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("close error %q does not name %q", err, want)
		}
	}
	if got := g.obs.audit.Load(); got != 1 {
		t.Fatalf("%d audit entries counted as dropped, want 1", got)
	}
}

// TestDecodeTATs: the admin API reads a TAT key in both of tatLua's forms
// (packed doubles, bit for bit; the text of a node before them) and reads
// anything else as a full bucket.
func TestDecodeTATs(t *testing.T) {
	r, tt := 1_796_000_000_000_000+60_000_000.0/7, 1_796_000_000_000_000+1.0/3
	packed := make([]byte, 16)
	binary.LittleEndian.PutUint64(packed, math.Float64bits(r))
	binary.LittleEndian.PutUint64(packed[8:], math.Float64bits(tt))
	nan := make([]byte, 16)
	binary.LittleEndian.PutUint64(nan, math.Float64bits(math.NaN()))
	for _, c := range []struct {
		name, v string
		r, t    float64
		ok      bool
	}{
		{"packed", string(packed), r, tt, true},
		{"text", strconv.FormatFloat(r, 'g', 17, 64) + ":" + strconv.FormatFloat(tt, 'g', 17, 64), r, tt, true},
		{"text, rpm part full", "0:" + strconv.FormatFloat(tt, 'g', 17, 64), 0, tt, true},
		{"empty", "", 0, 0, false},
		{"no separator", "1796000000000000.5", 0, 0, false},
		{"not numbers", "a:b", 0, 0, false},
		{"NaN packed", string(nan), 0, 0, false},
		{"Inf text", "Inf:1", 0, 0, false},
	} {
		gr, gt, ok := decodeTATs(c.v)
		if ok != c.ok || gr != c.r || gt != c.t {
			t.Errorf("%s: got %v %v %v, want %v %v %v", c.name, gr, gt, ok, c.r, c.t, c.ok)
		}
	}
}

func FuzzDecodeTATs(f *testing.F) {
	f.Add("1796000000000000.5:0")
	f.Add(string(make([]byte, 16)))
	f.Add("::")
	f.Fuzz(func(t *testing.T, v string) {
		r, tt, ok := decodeTATs(v)
		if ok && (math.IsNaN(r) || math.IsInf(r, 0) || math.IsNaN(tt) || math.IsInf(tt, 0)) {
			t.Fatalf("%q: ok with %v %v", v, r, tt)
		}
		if !ok && (r != 0 || tt != 0) {
			t.Fatalf("%q: not ok but %v %v", v, r, tt)
		}
	})
}
