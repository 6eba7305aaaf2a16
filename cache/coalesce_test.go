package cache

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"testing"

	"switchyard/wire"
)

func answerDeltas() []Delta {
	return []Delta{{Kind: DeltaText, Text: "Hel"}, {Kind: DeltaText, Text: "lo"},
		{Kind: DeltaTool, Index: 0, ID: "c1", Name: "f"}, {Kind: DeltaTool, Index: 0, Args: `{"a":1}`}}
}

var coalescedEntry = &Entry{Text: "Hello", ToolCalls: []ToolCall{{ID: "c1", Name: "f", Arguments: `{"a":1}`}}, Finish: "tool_calls",
	Usage: Usage{PromptTokens: 4, CompletionTokens: 3}, Model: "gpt-x", StoredAt: t0}

// drain reads a follower to the end, rendering it for t.
func drain(ctx context.Context, fl *Follower, r *Renderer) ([]byte, error) {
	var out []byte
	for {
		d, err := fl.Next(ctx)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, r.Render(d)...)
	}
}

// TestCoalesceFanOut: one leader, a follower per format and mode, each
// rendering the leader's deltas in its own format; one joins late and gets
// what it missed first.
func TestCoalesceFanOut(t *testing.T) {
	g := NewGroup(64, 1<<20)
	k := key(1)
	lead, fl := g.Lead(k, true)
	if lead == nil || fl != nil {
		t.Fatal("the first request must lead")
	}
	ctx := context.Background()
	type result struct {
		f   wire.Format
		out []byte
		err error
	}
	results := make(chan result, 6)
	var wg sync.WaitGroup
	follow := func(f wire.Format) {
		_, fl := g.Lead(k, true)
		if fl == nil {
			t.Fatal("a second request must follow")
		}
		r, err := NewRenderer(target(t, f, true), "gpt-x", 4)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := drain(ctx, fl, r)
			results <- result{f, out, err}
		}()
	}
	for _, f := range formats {
		follow(f.format)
	}
	ds := answerDeltas()
	lead.Publish(ds[0])
	lead.Publish(ds[1])
	for _, f := range formats { // late joiners
		follow(f.format)
	}
	if n := lead.Followers(); n != 6 {
		t.Fatalf("%d followers", n)
	}
	lead.Publish(ds[2])
	lead.Publish(ds[3])
	lead.Complete(coalescedEntry)
	wg.Wait()
	close(results)
	for r := range results {
		if r.err != nil {
			t.Fatal(r.err)
		}
		checkAnswer(t, coalescedEntry, readWithSDK(t, r.f, true, r.out))
	}
	if g.Len() != 0 {
		t.Fatal("flight kept after completion")
	}
	if lead2, _ := g.Lead(k, true); lead2 == nil {
		t.Fatal("a request after completion must lead a new flight")
	}
}

// TestCoalesceSyncFollowers: sync followers get the entry.
func TestCoalesceSyncFollowers(t *testing.T) {
	g := NewGroup(4, 1<<20)
	lead, _ := g.Lead(key(2), false)
	var fls []*Follower
	for range 20 {
		_, fl := g.Lead(key(2), false)
		fls = append(fls, fl)
	}
	for _, d := range answerDeltas() {
		lead.Publish(d) // sync followers buffer nothing, so none is cut off
	}
	lead.Complete(coalescedEntry)
	for _, fl := range fls {
		e, err := fl.Wait(context.Background())
		if err != nil || e != coalescedEntry {
			t.Fatalf("%v %v", e, err)
		}
	}
}

// TestCoalesceSlowFollower: a follower that reads nothing is cut off alone
// once its buffer is full; the leader never blocks and the others get
// everything.
func TestCoalesceSlowFollower(t *testing.T) {
	g := NewGroup(2, 1<<20)
	lead, _ := g.Lead(key(3), true)
	_, slow := g.Lead(key(3), true)
	_, fast := g.Lead(key(3), true)
	ctx := context.Background()
	var got []Delta
	for i := range 10 {
		lead.Publish(Delta{Kind: DeltaText, Text: string(rune('a' + i))})
		d, err := fast.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, d)
	}
	if lead.Followers() != 1 {
		t.Fatalf("%d followers, want the fast one only", lead.Followers())
	}
	if _, err := slow.Next(ctx); !errors.Is(err, ErrTooSlow) {
		t.Fatalf("slow follower: %v", err)
	}
	lead.Complete(&Entry{Text: "abcdefghij", Finish: "stop"})
	d, err := fast.Next(ctx)
	if err != nil || d.Kind != DeltaFinish || d.Finish != "stop" || len(got) != 10 {
		t.Fatalf("%+v %v %d", d, err, len(got))
	}
	if _, err := fast.Next(ctx); err != io.EOF {
		t.Fatalf("after the finish: %v", err)
	}
}

// TestCoalesceLeaderFails: a failing leader releases every follower at
// once, even those with deltas still buffered.
func TestCoalesceLeaderFails(t *testing.T) {
	g := NewGroup(16, 1<<20)
	lead, _ := g.Lead(key(4), true)
	defer lead.Fail()
	var fls []*Follower
	for i := range 6 {
		_, fl := g.Lead(key(4), i%2 == 0)
		fls = append(fls, fl)
	}
	lead.Publish(Delta{Kind: DeltaText, Text: "x"})
	errs := make(chan error, len(fls))
	for _, fl := range fls {
		go func() {
			if fl.stream {
				var err error
				for err == nil {
					_, err = fl.Next(context.Background())
				}
				errs <- err
				return
			}
			_, err := fl.Wait(context.Background())
			errs <- err
		}()
	}
	lead.Fail()
	for range fls {
		if err := <-errs; !errors.Is(err, ErrLeaderFailed) {
			t.Fatalf("follower ended with %v", err)
		}
	}
	lead.Complete(coalescedEntry) // after Fail: nothing
	if g.Len() != 0 {
		t.Fatal("failed flight kept")
	}
}

// TestCoalesceBoundedWait: a follower whose wait ends (coalesce_wait, or
// its client left) detaches and the flight goes on.
func TestCoalesceBoundedWait(t *testing.T) {
	g := NewGroup(4, 1<<20)
	lead, _ := g.Lead(key(5), true)
	_, a := g.Lead(key(5), false)
	_, b := g.Lead(key(5), true)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := a.Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	if _, err := b.Next(ctx); !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	b.Leave() // twice is fine
	if lead.Followers() != 0 {
		t.Fatalf("%d followers left", lead.Followers())
	}
	lead.Complete(coalescedEntry)
}

// TestCoalesceHistoryBound: an answer larger than the history bound takes
// no new followers (it will not be stored either); those attached go on.
func TestCoalesceHistoryBound(t *testing.T) {
	g := NewGroup(1024, 200)
	lead, _ := g.Lead(key(6), true)
	_, early := g.Lead(key(6), true)
	for range 5 {
		lead.Publish(Delta{Kind: DeltaText, Text: "0123456789"})
	}
	if l, f := g.Lead(key(6), true); l != nil || f != nil {
		t.Fatal("joined a flight past its history bound")
	}
	lead.Complete(&Entry{Text: "x", Finish: "stop"})
	n := 0
	for {
		_, err := early.Next(context.Background())
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 6 {
		t.Fatalf("early follower got %d deltas", n)
	}
}

// TestCoalesceSyncLeaderStreamFollower: a sync leader publishes no deltas;
// its streaming follower streams the entry as a hit would.
func TestCoalesceSyncLeaderStreamFollower(t *testing.T) {
	g := NewGroup(4, 1<<20)
	lead, _ := g.Lead(key(7), false)
	_, fl := g.Lead(key(7), true)
	lead.Complete(coalescedEntry)
	r, err := NewRenderer(target(t, wire.FormatAnthropic, true), "gpt-x", 4)
	if err != nil {
		t.Fatal(err)
	}
	out, err := drain(context.Background(), fl, r)
	if err != nil {
		t.Fatal(err)
	}
	checkAnswer(t, coalescedEntry, readWithSDK(t, wire.FormatAnthropic, true, out))
}

// TestCoalesceStress: followers joining at random points and reading at
// random paces (seeded) each get the whole answer in order, or are cut off
// with ErrTooSlow; never a gap, a reorder or a blocked leader.
func TestCoalesceStress(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for round := range 20 {
		g := NewGroup(1+rng.IntN(8), 1<<20)
		lead, _ := g.Lead(key(round), true)
		const n = 200
		var wg sync.WaitGroup
		errs := make(chan error, 64)
		join := func(seed uint64) {
			_, fl := g.Lead(key(round), true)
			if fl == nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := rand.New(rand.NewPCG(seed, 1))
				want := 0
				for {
					if r.IntN(4) == 0 {
						runtime.Gosched() // a slower reader now and then
					}
					d, err := fl.Next(context.Background())
					if errors.Is(err, ErrTooSlow) {
						return
					}
					if err != nil {
						errs <- err
						return
					}
					if d.Kind == DeltaFinish {
						if want != n {
							errs <- fmt.Errorf("finish after %d deltas", want)
						}
						return
					}
					if d.Text != strconv.Itoa(want) {
						errs <- fmt.Errorf("got delta %s, want %d", d.Text, want)
						return
					}
					want++
				}
			}()
		}
		for i := range n {
			if rng.IntN(20) == 0 {
				join(rng.Uint64())
			}
			lead.Publish(Delta{Kind: DeltaText, Text: strconv.Itoa(i)})
		}
		lead.Complete(&Entry{Finish: "stop"})
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("round %d: %v", round, err)
		}
	}
}
