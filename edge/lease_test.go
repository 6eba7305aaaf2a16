package edge

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"switchyard/cache"
	"switchyard/catalog"
	"switchyard/internal/teamtest"
)

// The coalescing lease of SPEC 18 on miniredis: who leads and who follows,
// how a lease ends (its holder alone), renews and runs out, and how a
// follower learns the end.

var entryHex = strings.Repeat("ab", 32)

// entryName is the response-cache entry the lease tests coalesce on.
var entryName = CacheKey("m", entryHex)

// coalesceReq is a request that reads entryName and asks for its lease.
func coalesceReq(team *catalog.Team) *Request {
	return &Request{RequestID: "r", Team: team, Tokens: 10, Pins: PinQuery{Cache: [2]string{entryName}, Coalesce: true}}
}

// tripHook counts the round trips of a client: a command or a pipeline.
type tripHook struct{ n atomic.Int64 }

func (h *tripHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *tripHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}
func (h *tripHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmds)
	}
}

// peer is another node's edge state on g's Redis and clock.
func (g *miniRig) peer(t *testing.T, cfg Config) *Redis {
	t.Helper()
	cfg.Prefix, cfg.Clock = "sy:", g.clk.Now
	if cfg.Timeout == 0 {
		cfg.Timeout = time.Second
	}
	if cfg.SlotLease == 0 {
		cfg.SlotLease = g.r.cfg.SlotLease
	}
	p := newRedis(g.c, nil, cfg, nil, nil, nil, nil)
	t.Cleanup(p.notices.close)
	return p
}

func beginQ(t *testing.T, st State, q *Request) Begun {
	t.Helper()
	b, err := st.Begin(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

const leaseKey = "sy:{team:%s}:rc:m:" // the lease lives in the entry's key

func leaseOf(team string) string { return strings.Replace(leaseKey, "%s", team, 1) + entryHex }

// leased reports whether team's entry key holds a lease (not an entry).
func leased(m *miniredis.Miniredis, team string) bool {
	v, _ := m.Get(leaseOf(team))
	return IsLease(v)
}

// TestCoalesceLeadFollow: on a missing entry the first request of the
// cluster leads (it holds the lease, under its token) and the others, on
// any node, follow it and mark the lease; once the entry is stored (the
// leader's Finish through the writer) the lease is gone and the next
// request finds the entry. Every shape of Begin's round trip (readLua for
// a team without limits, gcraLua, beginLua) takes the lease in that one
// round trip, and a refused admission takes none.
func TestCoalesceLeadFollow(t *testing.T) {
	for _, tc := range []struct {
		name    string
		lim     teamtest.Limits
		general bool
	}{
		{"no limits", teamtest.Limits{}, false},
		{"gcraLua", teamtest.Limits{RPM: 1000, TPM: 100000}, false},
		{"beginLua", teamtest.Limits{RPM: 1000, TPM: 100000}, true},
		{"beginLua slots", teamtest.Limits{Par: 10, USD: 100}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newMiniRig(t, Config{}, false)
			g.r.general = tc.general
			other := g.peer(t, Config{})
			other.general = tc.general
			team := teamtest.Team("c", tc.lim)
			q := coalesceReq(team)

			// warm: the connection open and the script loaded
			warm := coalesceReq(teamtest.Team("warm", tc.lim))
			beginQ(t, g.r, warm)
			t.Cleanup(g.r.notices.close)
			waitSubscribed(t, g, 1) // its connection opened too
			trips := &tripHook{}
			g.c.AddHook(trips)
			lead := beginQ(t, g.r, q)
			if lead.Coalesce != CoalesceLead || lead.Local {
				t.Fatalf("first request: %v (local %v), want lead", lead.Coalesce, lead.Local)
			}
			if n := trips.n.Load(); n != 1 {
				t.Fatalf("a miss that takes the lease cost %d round trips, want one", n)
			}
			v, err := g.m.Get(leaseOf("c"))
			if err != nil || v != lead.tok || !strings.HasPrefix(v, LeaseMark+g.r.node+":") {
				t.Fatalf("lease = %q (%v), want the leader's token %q", v, err, lead.tok)
			}
			for i, st := range []*Redis{other, g.r} {
				f := beginQ(t, st, q)
				if f.Coalesce != CoalesceFollow || f.tok != "" || f.lease != leaseOf("c") {
					t.Fatalf("request %d: %v, want follow", i, f.Coalesce)
				}
				st.Finish(&f, &Outcome{})
			}
			if v, _ := g.m.Get(leaseOf("c")); v != lead.tok+"+" {
				t.Fatalf("a followed lease = %q, want the token marked once", v)
			}

			g.r.Finish(&lead, &Outcome{Served: true, CacheKey: entryName, CacheValue: []byte("entry"), CacheTTL: time.Minute})
			if !g.step(t) {
				t.Fatal("writer step failed")
			}
			if v, _ := g.m.Get(leaseOf("c")); v != "entry" {
				t.Fatalf("the entry's key holds %q after its leader's Finish, want the entry in place of the lease", v)
			}
			hit := beginQ(t, other, q)
			if hit.Coalesce != CoalesceNone || hit.Pins.Cache[0] != "entry" {
				t.Fatalf("after the leader: %v with %q, want the entry", hit.Coalesce, hit.Pins.Cache[0])
			}
			if leased(g.m, "c") {
				t.Fatal("a hit took a lease")
			}
		})
	}
}

// TestCoalesceRefusedTakesNoLease: a request its limits refuse calls no
// upstream, so it must not lead.
func TestCoalesceRefusedTakesNoLease(t *testing.T) {
	for _, general := range []bool{false, true} {
		g := newMiniRig(t, Config{}, false)
		g.r.general = general
		team := teamtest.Team("r", teamtest.Limits{RPM: 1})
		if b := begin(t, g.r, team, 1); !b.Decision.Allowed {
			t.Fatal("first request refused")
		}
		b := beginQ(t, g.r, coalesceReq(team))
		if b.Decision.Allowed || b.Coalesce != CoalesceNone || leased(g.m, "r") {
			t.Fatalf("general %v: refused request: allowed %v, role %v, lease %v", general, b.Decision.Allowed, b.Coalesce, leased(g.m, "r"))
		}
	}
}

// TestCoalesceLeaseLife: a lease whose node stops renewing it (the node
// died) runs out within one slot lease, and the next request leads; a
// live leader's writer renews it like a slot lease, so it outlives many
// leases while the request runs, but never past the request's deadline.
func TestCoalesceLeaseLife(t *testing.T) {
	lease := 3 * time.Second
	g := newMiniRig(t, Config{SlotLease: lease}, false)
	other := g.peer(t, Config{})
	team := teamtest.Team("l", teamtest.Limits{})
	q := coalesceReq(team)

	dead := beginQ(t, g.r, q)
	if dead.Coalesce != CoalesceLead {
		t.Fatal("no leader")
	}
	if ttl := g.m.TTL(leaseOf("l")); ttl <= 0 || ttl > lease {
		t.Fatalf("lease ttl %v, want at most one slot lease (%v)", ttl, lease)
	}
	g.m.FastForward(lease + time.Millisecond) // its node never renews it
	next := beginQ(t, other, q)
	if next.Coalesce != CoalesceLead {
		t.Fatalf("after a dead leader's lease: %v, want lead", next.Coalesce)
	}
	// the dead leader's late end (its token) leaves the new lease alone
	g.r.Finish(&dead, &Outcome{})
	g.step(t)
	if v, _ := g.m.Get(leaseOf("l")); v != next.tok {
		t.Fatalf("lease = %q after the old holder's end, want the new holder's %q", v, next.tok)
	}

	// a live leader, renewed every third of a lease by its writer
	g2 := newMiniRig(t, Config{SlotLease: lease}, false)
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	held, err := g2.r.Begin(ctx, q)
	if err != nil || held.Coalesce != CoalesceLead {
		t.Fatalf("%v %v", held.Coalesce, err)
	}
	for range 12 {
		g2.advance(lease / 3)
		g2.m.FastForward(lease / 3)
		if !g2.step(t) {
			t.Fatal("writer step failed")
		}
	}
	if v, _ := g2.m.Get(leaseOf("l")); v != held.tok {
		t.Fatalf("a renewed lease ran out while its request ran (%q)", v)
	}

	// a request with 2 s left: its lease lives 2 s, and is not renewed past them
	g3 := newMiniRig(t, Config{SlotLease: lease}, false)
	short, cancel2 := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel2()
	b, _ := g3.r.Begin(short, q)
	if ttl := g3.m.TTL(leaseOf("l")); b.Coalesce != CoalesceLead || ttl <= 0 || ttl > 2*time.Second {
		t.Fatalf("lease ttl %v for a request with 2s left", ttl)
	}
	for range 3 {
		g3.advance(lease / 3)
		g3.m.FastForward(lease / 3)
		g3.step(t)
	}
	if g3.m.Exists(leaseOf("l")) {
		t.Fatal("a lease was renewed past its request's deadline (server.request_timeout)")
	}
}

// notices subscribes a test client to the rig's notice channel.
func (g *miniRig) notices(t *testing.T) <-chan *redis.Message {
	t.Helper()
	ps := g.c.Subscribe(context.Background(), noticeChannel("sy:"))
	if _, err := ps.Receive(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ps.Close() })
	return ps.Channel()
}

func recv(t *testing.T, ch <-chan *redis.Message) string {
	t.Helper()
	select {
	case m := <-ch:
		return m.Payload
	case <-time.After(5 * time.Second):
		t.Fatal("no notice within 5s")
		return ""
	}
}

// TestCoalesceNotices: a followed lease ends with a notice: '1' when the
// entry is stored, published after the entry's SET (the follower woken by
// it finds the entry), '2' at once (the writer is woken) when the leader
// ends without it; a lease nobody followed ends without one.
func TestCoalesceNotices(t *testing.T) {
	g := newMiniRig(t, Config{}, false)
	other := g.peer(t, Config{})
	team := teamtest.Team("n", teamtest.Limits{})
	q := coalesceReq(team)
	ch := g.notices(t)

	lonely := beginQ(t, g.r, q)
	g.r.Finish(&lonely, &Outcome{})
	g.step(t)

	lead := beginQ(t, g.r, q)
	if f := beginQ(t, other, q); f.Coalesce != CoalesceFollow {
		t.Fatal("no follower")
	}
	select {
	case <-g.r.w.wake:
	default:
	}
	g.r.Finish(&lead, &Outcome{})
	select {
	case <-g.r.w.wake:
	default:
		t.Fatal("a failed leader's end did not wake the writer")
	}
	g.step(t)
	if p := recv(t, ch); p != "2"+leaseOf("n") {
		t.Fatalf("notice %q, want the failure of %s (and none for the lease nobody followed)", p, leaseOf("n"))
	}

	lead = beginQ(t, g.r, q)
	beginQ(t, other, q)
	g.r.Finish(&lead, &Outcome{Served: true, CacheKey: entryName, CacheValue: []byte("stored"), CacheTTL: time.Minute})
	g.step(t)
	if p := recv(t, ch); p != "1"+leaseOf("n") {
		t.Fatalf("notice %q, want the end with the entry", p)
	}
	if v, _ := g.m.Get("sy:{team:n}:" + entryName); v != "stored" {
		t.Fatalf("entry %q when its notice arrived, want the entry in place of the lease", v)
	}
}

// await runs Await for follower f of st in the background.
func await(st State, f *Begun, wait time.Duration) <-chan error {
	out := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		v, err := st.Await(ctx, f)
		if err == nil && v != "stored" {
			err = errors.New("entry " + v)
		}
		out <- err
	}()
	return out
}

func waitErr(t *testing.T, ch <-chan error, within time.Duration) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(within):
		t.Fatalf("Await did not return within %v", within)
		return nil
	}
}

// waitSubscribed waits (bounded) until n nodes' notice subscriptions are
// live.
func waitSubscribed(t *testing.T, g *miniRig, n int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); g.m.PubSubNumSub(noticeChannel("sy:"))[noticeChannel("sy:")] < n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("notice channel not subscribed within 5s")
		}
	}
}

// TestCoalesceAwait: a follower on another node is woken by the leader's
// notice (its poll is set to an hour here, so only the notice can wake
// it) and reads the entry; a failed leader releases it at once; a leader
// whose lease ran out without a notice is found by the poll; a follower
// never waits past its context, and Redis unreachable ends its wait.
func TestCoalesceAwait(t *testing.T) {
	g := newMiniRig(t, Config{SlotLease: 3 * time.Second}, false)
	other := g.peer(t, Config{CoalescePoll: time.Hour})
	team := teamtest.Team("a", teamtest.Limits{})
	q := coalesceReq(team)

	t.Cleanup(g.r.notices.close)
	lead := beginQ(t, g.r, q)
	f := beginQ(t, other, q)
	waitSubscribed(t, g, 2) // the leader's node's and the follower's
	done := await(other, &f, 10*time.Second)
	for other.notices.waiters(f.lease) == 0 {
		time.Sleep(time.Millisecond)
	}
	g.r.Finish(&lead, &Outcome{Served: true, CacheKey: entryName, CacheValue: []byte("stored"), CacheTTL: time.Minute})
	g.step(t)
	if err := waitErr(t, done, 5*time.Second); err != nil {
		t.Fatalf("follower woken by the notice: %v", err)
	}

	g.m.Del("sy:{team:a}:" + entryName)
	lead = beginQ(t, g.r, q)
	f = beginQ(t, other, q)
	done = await(other, &f, 10*time.Second)
	for other.notices.waiters(f.lease) == 0 {
		time.Sleep(time.Millisecond)
	}
	g.r.Finish(&lead, &Outcome{Served: false})
	g.step(t)
	if err := waitErr(t, done, 5*time.Second); !errors.Is(err, ErrLeaderFailed) {
		t.Fatalf("follower of a failed leader: %v, want ErrLeaderFailed", err)
	}

	// a dead leader: no notice; the poll finds the lease gone
	polling := g.peer(t, Config{CoalescePoll: 5 * time.Millisecond})
	beginQ(t, g.r, q)
	f = beginQ(t, polling, q)
	g.m.FastForward(4 * time.Second)
	if err := waitErr(t, await(polling, &f, 10*time.Second), 5*time.Second); !errors.Is(err, ErrLeaseGone) {
		t.Fatalf("follower of a dead leader: %v, want ErrLeaseGone", err)
	}

	// a live leader that takes too long: the follower's own deadline
	beginQ(t, g.r, q)
	f = beginQ(t, polling, q)
	if err := waitErr(t, await(polling, &f, 50*time.Millisecond), 5*time.Second); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("follower past its wait: %v", err)
	}

	// Redis unreachable: no wait beyond one poll
	down := g.peer(t, Config{CoalescePoll: 5 * time.Millisecond})
	hd := &health{}
	down.health = hd
	f = beginQ(t, down, q)
	if f.Coalesce != CoalesceFollow {
		t.Fatalf("%v", f.Coalesce)
	}
	hd.down.Store(true)
	if err := waitErr(t, await(down, &f, 10*time.Second), 5*time.Second); err == nil {
		t.Fatal("a follower waited on with Redis down")
	}
	if nf := beginQ(t, down, q); nf.Coalesce != CoalesceLead || !nf.Local {
		t.Fatalf("Begin with Redis down: %v local %v, want lead locally", nf.Coalesce, nf.Local)
	}
	if _, err := down.Await(context.Background(), &Begun{}); !errors.Is(err, ErrNotFollowing) {
		t.Fatalf("Await of a non-follower: %v", err)
	}
}

// TestCoalesceLocal: a node without Redis has no other node to coalesce
// with: a request that asks always leads, and never follows.
func TestCoalesceLocal(t *testing.T) {
	l := NewLocal(nil, nil)
	for _, team := range []*catalog.Team{teamtest.Team("x", teamtest.Limits{}), teamtest.Team("y", teamtest.Limits{RPM: 10})} {
		b := beginQ(t, l, coalesceReq(team))
		if b.Coalesce != CoalesceLead {
			t.Fatalf("%s: %v, want lead", team.Name, b.Coalesce)
		}
		if _, err := l.Await(context.Background(), &b); !errors.Is(err, ErrNotFollowing) {
			t.Fatalf("local Await: %v", err)
		}
		l.Finish(&b, &Outcome{})
	}
}

// TestCoalesceEndOrder: an end with the entry never goes out before the
// entry's SET (a batch that left the entry for a later one, past
// maxBatchItems pins, keeps the end for that one too), and an entry the
// writer could not keep (its bound) ends the lease without it, at once.
func TestCoalesceEndOrder(t *testing.T) {
	ts := newTeamState("sy:", "o", "n")
	ts.pins = map[string]pinWrite{entryName: {value: "later", ttl: time.Minute, cache: true}}
	ts.leaseOps = []leaseOp{
		{key: "sy:{team:o}:" + entryName, tok: "n:1", op: leaseDone, entry: entryName},
		{key: "sy:{team:o}:" + CacheKey("m", "other"), tok: "n:2", op: leaseFail, entry: CacheKey("m", "other")},
	}
	ops := ts.takeLeasesLocked(time.Now(), false, time.Second)
	if len(ops) != 1 || ops[0].tok != "n:2" || len(ts.leaseOps) != 1 || ts.leaseOps[0].tok != "n:1" {
		t.Fatalf("taken %+v, kept %+v: the end with the entry must wait for its SET", ops, ts.leaseOps)
	}
	delete(ts.pins, entryName) // the entry's SET went in a batch
	if ops = ts.takeLeasesLocked(time.Now(), false, time.Second); len(ops) != 1 || ops[0].tok != "n:1" || ts.leaseOps != nil {
		t.Fatalf("taken %+v, kept %+v", ops, ts.leaseOps)
	}

	urgent, _ := ts.endLeaseLocked(leaseOp{key: "k", tok: "n:3", op: leaseDone, entry: entryName}, false)
	if !urgent || ts.leaseOps[0].op != leaseFail {
		t.Fatalf("an entry not kept for Redis ended its lease as %+v (urgent %v), want a failure at once", ts.leaseOps[0], urgent)
	}
}

// TestEntriesNeverReadAsLeases: a lease lives in its entry's key, told
// apart by its first byte (LeaseMark), so no encoded entry may start with
// that byte, and a lease must never decode as an entry.
func TestEntriesNeverReadAsLeases(t *testing.T) {
	for _, e := range []*cache.Entry{
		{},
		{Text: "hello", Finish: "stop", Model: "m", Deployment: "d", StoredAt: time.Unix(1_796_000_000, 0)},
		{Embeddings: true, Vectors: [][]float64{{0, 1}}, Model: "e"},
	} {
		if b := e.Encode(nil); IsLease(string(b)) {
			t.Fatalf("entry %+v encodes as %q, which reads as a lease", e, b)
		}
	}
	for _, v := range []string{LeaseMark, LeaseMark + "node:1", LeaseMark + "node:1+"} {
		if _, err := cache.Decode([]byte(v)); err == nil {
			t.Fatalf("the lease %q decodes as an entry", v)
		}
	}
}
