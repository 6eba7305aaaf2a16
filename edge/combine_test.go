package edge

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"switchyard/catalog"
	"switchyard/internal/teamtest"
)

// gateClient holds the first EVALSHA until release is closed and counts the
// script calls sent alone (with the number of teams each carried) and the
// pipelines.
type gateClient struct {
	Client
	release      chan struct{}
	first        atomic.Bool
	alone, pipes atomic.Int64
	piped        atomic.Int64
	beforePipe   func()

	mu    sync.Mutex
	teams []any   // the number of teams of each call sent alone
	args  [][]any // the arguments of each call sent alone
}

func (g *gateClient) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	g.alone.Add(1)
	var teams any
	switch {
	case sha == gcraScript.Hash(): // gcraLua: the limit pairs, then the number of teams
		teams = args[1+2*args[0].(int)]
	case len(args) > 1: // beginLua: ARGV 2
		teams = args[1]
	}
	g.mu.Lock()
	if teams != nil {
		g.teams = append(g.teams, teams)
	}
	g.args = append(g.args, args)
	g.mu.Unlock()
	if g.first.CompareAndSwap(false, true) {
		<-g.release
	}
	return g.Client.EvalSha(ctx, sha, keys, args...)
}

func (g *gateClient) Pipelined(ctx context.Context, fn func(redis.Pipeliner) error) ([]redis.Cmder, error) {
	if g.pipes.Add(1) == 1 && g.beforePipe != nil {
		g.beforePipe()
	}
	cmds, err := g.Client.Pipelined(ctx, fn)
	g.piped.Add(int64(len(cmds)))
	return cmds, err
}

// TestAdmissionsOfManyTeamsShareARoundTrip: on one shard, the admissions of
// 40 different teams that arrive while a call is in flight go out together,
// in one script call carrying all 39 teams (one clock read, one script
// start), and each is decided in Redis with its own team's answer. On
// Cluster (OneShard off) every team batches alone, as before: 40 calls.
func TestAdmissionsOfManyTeamsShareARoundTrip(t *testing.T) {
	for _, oneShard := range []bool{true, false} {
		t.Run(fmt.Sprintf("one-shard=%v", oneShard), func(t *testing.T) {
			rig := newMiniRig(t, Config{OneShard: oneShard, Timeout: 5 * time.Second}, false)
			gc := &gateClient{Client: rig.c, release: make(chan struct{})}
			rig.r.c = gc
			const n = 40
			teams := make([]*catalog.Team, n)
			for i := range teams {
				teams[i] = teamtest.Team(fmt.Sprintf("t%d", i), teamtest.Limits{RPM: int64(10 + i)})
			}
			ctx := context.Background()
			var wg sync.WaitGroup
			got := make([]Begun, n)
			run := func(i int) {
				defer wg.Done()
				b, err := rig.r.Begin(ctx, &Request{RequestID: reqID(i), Team: teams[i], Tokens: 1})
				if err != nil {
					t.Error(err)
				}
				got[i] = b
			}
			wg.Add(1)
			go run(0)
			for gc.alone.Load() == 0 { // the first call is in flight (held)
				time.Sleep(time.Millisecond)
			}
			wg.Add(n - 1)
			for i := 1; i < n; i++ {
				go run(i)
			}
			if oneShard {
				waitQueued(t, &rig.r.comb, n-1)
			}
			close(gc.release)
			wg.Wait()
			for i, b := range got {
				if !b.Decision.Allowed || b.Local {
					t.Fatalf("team %d: allowed %v local %v", i, b.Decision.Allowed, b.Local)
				}
				if b.Decision.LimitRequests != int64(10+i) || b.Decision.RemainingRequests != int64(10+i-1) {
					t.Fatalf("team %d got another team's answer: limit %d remaining %d", i, b.Decision.LimitRequests, b.Decision.RemainingRequests)
				}
			}
			if oneShard {
				if gc.alone.Load() != 2 || gc.pipes.Load() != 0 || fmt.Sprint(gc.teams) != fmt.Sprintf("[1 %d]", n-1) {
					t.Fatalf("round trips: %d calls alone carrying %v teams, %d pipelines; want 2 carrying [1 %d], 0", gc.alone.Load(), gc.teams, gc.pipes.Load(), n-1)
				}
			} else if gc.alone.Load() != n || gc.pipes.Load() != 0 {
				t.Fatalf("cluster: %d calls alone, %d pipelines; want %d and 0", gc.alone.Load(), gc.pipes.Load(), n)
			}
			if rig.obs.fallbacks.Load() != 0 {
				t.Fatalf("%d fallbacks", rig.obs.fallbacks.Load())
			}
		})
	}
}

// TestLeanCallSharesLimitPairs: a gcraLua call sends each distinct limit
// pair once and each team the number of its pair. Six teams of two plans
// (one of them with two admissions) queued behind a held call go out in one
// call carrying two pairs, and each admission is decided against its own
// plan and its own team's TATs.
func TestLeanCallSharesLimitPairs(t *testing.T) {
	rig := newMiniRig(t, Config{OneShard: true, Timeout: 5 * time.Second}, false)
	gc := &gateClient{Client: rig.c, release: make(chan struct{})}
	rig.r.c = gc
	plans := []teamtest.Limits{{RPM: 5, TPM: 1000}, {RPM: 7, TPM: 2000}}
	teams := []*catalog.Team{teamtest.Team("first", plans[0])}
	for i := range 6 {
		teams = append(teams, teamtest.Team(fmt.Sprintf("t%d", i), plans[i%2]))
	}
	teams = append(teams, teams[1]) // t0 again: two admissions of one team
	ctx := context.Background()
	got := make([]Begun, len(teams))
	var wg sync.WaitGroup
	run := func(i int) {
		defer wg.Done()
		x, err := rig.r.Begin(ctx, &Request{RequestID: reqID(i), Team: teams[i], Tokens: 10})
		if err != nil {
			t.Error(err)
		}
		got[i] = x
	}
	wg.Add(1)
	go run(0)
	for gc.alone.Load() == 0 { // the first call is in flight (held)
		time.Sleep(time.Millisecond)
	}
	wg.Add(len(teams) - 1)
	for i := 1; i < len(teams); i++ {
		go run(i)
	}
	waitQueued(t, &rig.r.comb, len(teams)-1)
	close(gc.release)
	wg.Wait()
	if gc.alone.Load() != 2 || fmt.Sprint(gc.teams) != "[1 6]" {
		t.Fatalf("%d calls carrying %v teams; want 2 carrying [1 6]", gc.alone.Load(), gc.teams)
	}
	// the pairs, the number of teams, 2 a team, 3 an admission
	if a := gc.args[1]; a[0] != 2 || len(a) != 1+2*2+1+6*2+7*3 {
		t.Fatalf("second call: %d pairs, %d arguments; want 2 and %d: %v", a[0], len(a), 1+2*2+1+6*2+7*3, a)
	}
	for i, x := range got {
		want := plans[0]
		if i > 0 && (i-1)%2 == 1 && i != len(teams)-1 {
			want = plans[1]
		}
		d := x.Decision
		if !d.Allowed || x.Local || d.LimitRequests != want.RPM || d.LimitTokens != want.TPM {
			t.Fatalf("admission %d (%s): allowed %v local %v limits %d/%d, want %d/%d", i, teams[i].Name, d.Allowed, x.Local, d.LimitRequests, d.LimitTokens, want.RPM, want.TPM)
		}
		// what is left is the script's, from the limits it was sent
		if teams[i] != teams[1] && (d.RemainingRequests != want.RPM-1 || d.RemainingTokens != want.TPM-10) {
			t.Fatalf("admission %d (%s): %d requests and %d tokens left, want %d and %d", i, teams[i].Name, d.RemainingRequests, d.RemainingTokens, want.RPM-1, want.TPM-10)
		}
	}
	// t0's two admissions are one team's: the second sees the first's charge
	a, b := got[1].Decision.RemainingRequests, got[len(teams)-1].Decision.RemainingRequests
	if min(a, b) != 3 || max(a, b) != 4 {
		t.Fatalf("t0's admissions left %d and %d requests; want 4 and 3", a, b)
	}
}

// TestPipelinedAdmissionsAfterScriptFlush: a pipelined batch (more teams
// than one call carries: here one per call) whose script Redis no longer
// knows (SCRIPT FLUSH, a restart) is sent again with EVAL and decided in
// Redis.
func TestPipelinedAdmissionsAfterScriptFlush(t *testing.T) {
	rig := newMiniRig(t, Config{OneShard: true, Timeout: 5 * time.Second}, false)
	rig.r.teamsPerCall = 1
	ctx := context.Background()
	gc := &gateClient{Client: rig.c, release: make(chan struct{})}
	gc.beforePipe = func() { rig.c.ScriptFlush(ctx) }
	rig.r.c = gc
	teams := []*catalog.Team{teamtest.Team("a", teamtest.Limits{RPM: 5}), teamtest.Team("b", teamtest.Limits{RPM: 7}), teamtest.Team("a", teamtest.Limits{RPM: 5})}
	got := make([]Begun, len(teams))
	var wg sync.WaitGroup
	run := func(i int) {
		defer wg.Done()
		x, err := rig.r.Begin(ctx, &Request{RequestID: reqID(i), Team: teams[i], Tokens: 1})
		if err != nil {
			t.Error(err)
		}
		got[i] = x
	}
	wg.Add(1)
	go run(0)
	for gc.alone.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	wg.Add(2)
	go run(1)
	go run(2)
	waitQueued(t, &rig.r.comb, 2)
	close(gc.release)
	wg.Wait()
	if gc.pipes.Load() != 2 {
		t.Fatalf("%d pipelines; want 2 (EVALSHA, then EVAL after NOSCRIPT)", gc.pipes.Load())
	}
	for i, x := range got {
		if !x.Decision.Allowed || x.Local {
			t.Fatalf("%d: allowed %v local %v", i, x.Decision.Allowed, x.Local)
		}
	}
	if r := got[2].Decision.RemainingRequests; r != 3 {
		t.Fatalf("team a's second admission: remaining %d, want 3", r)
	}
	if rig.obs.fallbacks.Load() != 0 {
		t.Fatalf("%d fallbacks", rig.obs.fallbacks.Load())
	}
}

// lossyClient runs pipelines but, while lose is set, reports every command
// failed (the reply was lost: a timeout in an unknown state).
type lossyClient struct {
	Client
	lose        atomic.Bool
	pipes, cmds atomic.Int64
}

func (l *lossyClient) Pipelined(ctx context.Context, fn func(redis.Pipeliner) error) ([]redis.Cmder, error) {
	l.pipes.Add(1)
	cmds, err := l.Client.Pipelined(ctx, fn)
	l.cmds.Add(int64(len(cmds)))
	if l.lose.Load() {
		for _, c := range cmds {
			c.SetErr(context.DeadlineExceeded)
		}
		return cmds, context.DeadlineExceeded
	}
	return cmds, err
}

// EvalSha runs the script and, while lose is set, loses its reply.
func (l *lossyClient) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	c := l.Client.EvalSha(ctx, sha, keys, args...)
	if l.lose.Load() && c.Err() == nil {
		c.SetErr(context.DeadlineExceeded)
	}
	return c
}

// Eval runs the script and, while lose is set, loses its reply.
func (l *lossyClient) Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	c := l.Client.Eval(ctx, script, keys, args...)
	if l.lose.Load() && c.Err() == nil {
		c.SetErr(context.DeadlineExceeded)
	}
	return c
}

// TestOneShardWriterOneCallPerFlush: on one shard a flush carries every
// team's writes in one finishLua call under the node's mark; a call whose
// reply was lost is resent as it was (applied once), and what arrived
// meanwhile follows in the next call: usage exact for every team.
func TestOneShardWriterOneCallPerFlush(t *testing.T) {
	g := newMiniRig(t, Config{OneShard: true}, false)
	lc := &lossyClient{Client: g.c}
	g.r.c = lc
	const teams = 50
	serve := func(round int) {
		for i := range teams {
			tm := teamtest.Team(fmt.Sprintf("t%d", i), teamtest.Limits{RPM: 1000, TPM: 100_000})
			b := begin(t, g.r, tm, 10)
			g.r.Finish(&b, &Outcome{Served: true, Deployment: "d", PromptTokens: 4, CompletionTokens: 2, DepModel: "m", DepPin: fmt.Sprintf("r%d", round), DepTTL: time.Hour})
		}
	}
	serve(0) // the first call also loads the script (NOSCRIPT, then EVAL)
	if !g.step(t) {
		t.Fatal("step failed")
	}
	serve(1)
	before := lc.cmds.Load()
	if !g.step(t) {
		t.Fatal("step failed")
	}
	if n := lc.cmds.Load() - before; n != 1 {
		t.Fatalf("one flush of %d teams sent %d commands; want one finishLua call", teams, n)
	}
	// the next call is applied but its reply lost: resent as it was, no-op
	serve(2)
	lc.lose.Store(true)
	g.advance(time.Second)
	if g.step(t) {
		t.Fatal("a lost reply reported success")
	}
	lc.lose.Store(false)
	serve(3) // arrives while the call is unacknowledged
	for i := 0; i < 4 && (!g.r.w.empty() || g.r.w.inflight != nil); i++ {
		g.advance(defaultUsageEvery) // the usage rows wait this long (writer.dueUsage)
		g.step(t)
	}
	if !g.r.w.empty() {
		t.Fatal("writes still pending")
	}
	for i := range teams {
		key := fmt.Sprintf("sy:{team:t%d}:usage", i)
		if got := g.m.HGet(key, "d|req"); got != "4" {
			t.Fatalf("team %d: %s requests in Redis, want 4 (resend applied twice or lost)", i, got)
		}
		if got := g.m.HGet(key, "d|tok"); got != "24" {
			t.Fatalf("team %d: %s tokens, want 24", i, got)
		}
	}
}

// kindObs counts dropped writes by kind.
type kindObs struct {
	mu    sync.Mutex
	kinds map[string]int
}

func (o *kindObs) OnFallback(string)           {}
func (o *kindObs) OnWriteError(string, string) {}
func (o *kindObs) OnDropped(kind string, n int) {
	o.mu.Lock()
	o.kinds[kind] += n
	o.mu.Unlock()
}

// TestDroppedReleasesCounted: slot releases beyond the writer's bound are
// reported as "releases" (the lease frees them), not as pins.
func TestDroppedReleasesCounted(t *testing.T) {
	g := newMiniRig(t, Config{}, false)
	obs := &kindObs{kinds: map[string]int{}}
	g.r.obs = obs
	team := teamtest.Team("p", teamtest.Limits{Par: maxReleases + 10})
	ts := g.r.team(team)
	g.m.Close() // the writer cannot send: the releases pile up
	for i := range maxReleases + 3 {
		ts.add(team, &finishWrite{slot: fmt.Sprint("slot-", i)}, g.r.w, defaultMaxPins)
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if obs.kinds["releases"] != 3 || obs.kinds["pins"] != 0 {
		t.Fatalf("dropped %v; want 3 releases and no pins", obs.kinds)
	}
}

// TestReleaseFreesTheSlotAtOnce: Release removes a shared slot from Redis
// itself (no writer step), Finish then queues no second release, and the
// local fallback's slot is released exactly once.
func TestReleaseFreesTheSlotAtOnce(t *testing.T) {
	g := newMiniRig(t, Config{}, false)
	team := teamtest.Team("r1", teamtest.Limits{Par: 1})
	b := begin(t, g.r, team, 1)
	if !b.Decision.Allowed || b.Local || len(mustZ(t, g.m, "sy:{team:r1}:par")) != 1 {
		t.Fatalf("admission: allowed %v local %v", b.Decision.Allowed, b.Local)
	}
	g.r.Release(context.Background(), &b)
	if g.m.Exists("sy:{team:r1}:par") {
		t.Fatalf("slot still held in Redis after Release: %v", mustZ(t, g.m, "sy:{team:r1}:par"))
	}
	g.r.Finish(&b, &Outcome{Served: true})
	ts := g.r.team(team)
	ts.mu.Lock()
	pending, live := len(ts.releases), len(ts.live)
	ts.mu.Unlock()
	if pending != 0 || live != 0 {
		t.Fatalf("after Release and Finish: %d releases pending, %d slots renewed; want 0, 0", pending, live)
	}

	// the local edge state: one release, whatever the order of calls
	l := NewLocal(newFakeClock().Now, nil)
	for range 3 {
		lb, err := l.Begin(context.Background(), &Request{RequestID: "x", Team: team, Tokens: 1})
		if err != nil || !lb.Decision.Allowed {
			t.Fatalf("local admission refused: %v %+v", err, lb.Decision)
		}
		l.Release(context.Background(), &lb)
		l.Release(context.Background(), &lb)
		l.Finish(&lb, &Outcome{Served: true})
	}
	held, err := l.Begin(context.Background(), &Request{RequestID: "y", Team: team, Tokens: 1})
	if err != nil || !held.Decision.Allowed {
		t.Fatal("local slot leaked")
	}
	if again, _ := l.Begin(context.Background(), &Request{RequestID: "z", Team: team, Tokens: 1}); again.Decision.Allowed {
		t.Fatal("a double release let two requests hold max_parallel 1")
	}
}
