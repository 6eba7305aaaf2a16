package cache

import (
	"context"
	"errors"
	"io"
	"testing"
)

// A streaming leader's answer too large to keep (SPEC 18: not stored)
// still ends its streaming followers with its finish: they were handed
// every delta. A sync follower, which needs the whole answer, goes on
// alone; and the finish is never taken for a whole entry (Whole false).
func TestHostile5CompleteUnkept(t *testing.T) {
	g := NewGroup(8, 1<<20)
	k := Key{9}
	lead, _ := g.Lead(k, true)
	_, st := g.Lead(k, true)
	_, sy := g.Lead(k, false)
	lead.Publish(Delta{Kind: DeltaText, Text: "big"})
	lead.CompleteUnkept(&Entry{Finish: "stop", Usage: Usage{PromptTokens: 2, CompletionTokens: 9}, Model: "m"})

	var got []Delta
	for {
		d, err := st.Next(context.Background())
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("streaming follower: %v after %+v", err, got)
		}
		got = append(got, d)
	}
	if len(got) != 2 || got[0].Text != "big" || got[1].Kind != DeltaFinish || got[1].Finish != "stop" || got[1].Usage.CompletionTokens != 9 {
		t.Fatalf("streaming follower got %+v", got)
	}
	if st.Whole() || st.Entry() == nil || st.Entry().Model != "m" {
		t.Fatalf("whole %v entry %+v", st.Whole(), st.Entry())
	}
	if e, err := sy.Wait(context.Background()); !errors.Is(err, ErrLeaderFailed) || e != nil {
		t.Fatalf("sync follower: %+v %v", e, err)
	}
	if g.InFlight(k) {
		t.Fatal("flight still in progress")
	}

	// a whole answer is Whole
	lead2, _ := g.Lead(k, false)
	_, fl2 := g.Lead(k, false)
	lead2.Complete(&Entry{Finish: "stop", Text: "x"})
	if e, err := fl2.Wait(context.Background()); err != nil || e.Text != "x" || !fl2.Whole() {
		t.Fatalf("%+v %v whole %v", e, err, fl2.Whole())
	}
}
