package responses

import (
	"context"
	"errors"
	"testing"
	"time"

	"switchyard/wire"
)

// Input serves GET /v1/responses/{id}/input_items (OpenAI API reference,
// Responses > "List input items"): a stored response's own input items, in
// order, on any node (SPEC 10.1: in Redis a follow-up on any replica finds
// it), scoped by team, gone after delete and store_ttl. Redis's Get reads
// no input items, so before Input there was no way to list them on a node
// that did not serve the response.
func TestHostile5ResponsesInput(t *testing.T) {
	ctx := context.Background()
	for name, mk := range impls(t, Config{TTL: time.Hour, MaxLocal: 100}) {
		t.Run(name, func(t *testing.T) {
			im := mk()
			s := im.store
			in := []wire.Item{msg("", "developer", "be brief"), msg("", "user", "hi"),
				{Type: "function_call_output", CallID: "call_1", Output: "sunny"}}
			s.Save("team-a", rec("resp_i1", "resp_i0", in, "hello"))
			im.flush()
			stores := []Store{s}
			if im.other != nil {
				stores = append(stores, im.other())
			}
			for i, st := range stores {
				got, err := st.Input(ctx, "team-a", "resp_i1")
				if err != nil || len(got) != 3 || text(got[0]) != "be brief" || text(got[1]) != "hi" || got[2].CallID != "call_1" || got[2].Output != "sunny" {
					t.Fatalf("node %d: %+v %v", i, got, err)
				}
				if _, err := st.Input(ctx, "team-b", "resp_i1"); !errors.Is(err, ErrNotFound) {
					t.Fatalf("node %d, other team: %v", i, err)
				}
				if _, err := st.Input(ctx, "team-a", "resp_unknown"); !errors.Is(err, ErrNotFound) {
					t.Fatalf("node %d, unknown: %v", i, err)
				}
			}
			if ok, err := s.Delete(ctx, "team-a", "resp_i1"); !ok || err != nil {
				t.Fatalf("delete: %v %v", ok, err)
			}
			im.flush()
			for i, st := range stores {
				if _, err := st.Input(ctx, "team-a", "resp_i1"); !errors.Is(err, ErrNotFound) {
					t.Fatalf("node %d after delete: %v", i, err)
				}
			}
			s.Save("team-a", rec("resp_i2", "", in, "x"))
			im.flush()
			im.advance(61 * time.Minute)
			if _, err := s.Input(ctx, "team-a", "resp_i2"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("after ttl: %v", err)
			}
		})
	}
}
