package wire

import (
	"testing"

	"switchyard/catalog"
)

// TestResponsesItemReferenceWithoutType: OpenAI's Responses reference
// types an item reference as {"id": ..., "type": "item_reference"} with
// type optional ("string or null"), and the SDKs send {"id": ...} alone
// when it is left out: such an item names a stored item, not a malformed
// one (it was a 400 "has neither type nor role"). An item with neither
// type, role nor id is still refused.
func TestResponsesItemReferenceWithoutType(t *testing.T) {
	r, err := Parse([]byte(`{"model":"m","input":[{"id":"msg_9"},{"role":"user","content":"and then?"}]}`), catalog.OpChat, FormatResponses)
	if err != nil {
		t.Fatal(err)
	}
	rq := r.Responses
	if len(rq.Refs) != 1 || rq.Refs[0] != "msg_9" || rq.Input[0].Type != "item_reference" {
		t.Fatalf("refs %q, first item %+v", rq.Refs, rq.Input[0])
	}
	if _, err := Parse([]byte(`{"model":"m","input":[{"content":"x"}]}`), catalog.OpChat, FormatResponses); err == nil {
		t.Fatal("an item with neither type, role nor id was accepted")
	}
}
