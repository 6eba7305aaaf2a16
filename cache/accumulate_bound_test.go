package cache

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"switchyard/wire"
)

// retainedCalls is what an accumulator holds for its tool calls: how many
// it tracks (calls and index maps) and the bytes of their ids and names.
func retainedCalls(a *Accumulator) (calls, bytes int) {
	for _, c := range a.calls {
		bytes += len(c.ID) + len(c.Name)
	}
	return len(a.calls) + len(a.oaIndex) + len(a.blockCall), bytes
}

// A hostile (or broken) upstream streams tool call after tool call: the
// accumulator relays them but never holds more than max_entry_bytes of
// the answer and a bounded number of calls, whatever their number or
// size, and an answer with more calls than max_entry_bytes can hold is
// not stored (SPEC 14, 18). Empty ids and names count too.
func TestAccumulatorBoundsToolCalls(t *testing.T) {
	const maxBytes = 4096
	const n = 20000
	id := strings.Repeat("i", 100)
	cases := []struct {
		name   string
		format wire.Format
		event  func(i int, id string) string
		end    string
	}{
		{"openai", wire.FormatOpenAI, func(i int, id string) string {
			return fmt.Sprintf(`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":%d,"id":%q,"function":{"name":%q,"arguments":""}}]}}]}`+"\n\n", i, id, id)
		}, `data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}` + "\n\ndata: [DONE]\n\n"},
		{"anthropic", wire.FormatAnthropic, func(i int, id string) string {
			return fmt.Sprintf("event: content_block_start\n"+`data: {"type":"content_block_start","index":%d,"content_block":{"type":"tool_use","id":%q,"name":%q,"input":{}}}`+"\n\n", i, id, id)
		}, "event: message_delta\n" + `data: {"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":1}}` + "\n\nevent: message_stop\n" + `data: {"type":"message_stop"}` + "\n\n"},
		{"responses", wire.FormatResponses, func(i int, id string) string {
			return fmt.Sprintf("event: response.output_item.added\n"+`data: {"type":"response.output_item.added","output_index":%d,"item":{"type":"function_call","call_id":%q,"name":%q}}`+"\n\n", i, id, id)
		}, ""},
	}
	for _, c := range cases {
		for _, ids := range []string{"", id} {
			t.Run(fmt.Sprintf("%s/id%d", c.name, len(ids)), func(t *testing.T) {
				a := NewAccumulator(c.format, maxBytes)
				var ds []Delta
				deltas := 0
				for i := range n {
					ds = a.Add([]byte(c.event(i, ids)), ds[:0])
					deltas += len(ds)
				}
				calls, b := retainedCalls(a)
				if b > maxBytes {
					t.Errorf("holds %d bytes of ids and names, max_entry_bytes is %d", b, maxBytes)
				}
				if limit := 2 * (maxStreamCalls + 1); calls > limit {
					t.Errorf("tracks %d tool calls after %d starts, want at most %d", calls, n, limit)
				}
				if c.end == "" {
					return
				}
				a.Add([]byte(c.end), ds[:0])
				if _, err := a.Entry(Meta{Now: time.Unix(1, 0)}, Usage{}); !errors.Is(err, ErrNotStorable) {
					t.Errorf("an answer of %d tool calls is stored under max_entry_bytes %d (err %v)", n, maxBytes, err)
				}
			})
		}
	}
}

// Under the bounds nothing changes: every call of an ordinary answer is
// kept with its id and name, and each start is a delta for the followers.
func TestAccumulatorKeepsOrdinaryCalls(t *testing.T) {
	a := NewAccumulator(wire.FormatOpenAI, 1<<20)
	var ds []Delta
	for i := range 3 {
		ds = a.Add(fmt.Appendf(nil, `data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":%d,"id":"call_%d","function":{"name":"f%d","arguments":"{}"}}]}}]}`+"\n\n", i, i, i), ds)
	}
	// the id repeated in a later chunk of the same call is not a new call
	ds = a.Add([]byte(`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":2,"id":"call_2","function":{"arguments":" "}}]}}]}`+"\n\n"), ds)
	ds = a.Add([]byte(`data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`+"\n\ndata: [DONE]\n\n"), ds)
	e, err := a.Entry(Meta{Now: time.Unix(1, 0)}, Usage{})
	if err != nil {
		t.Fatal(err)
	}
	want := []ToolCall{{"call_0", "f0", "{}"}, {"call_1", "f1", "{}"}, {"call_2", "f2", "{} "}}
	if fmt.Sprint(e.ToolCalls) != fmt.Sprint(want) {
		t.Fatalf("calls %v, want %v", e.ToolCalls, want)
	}
	if len(ds) != 7 {
		t.Fatalf("%d deltas, want 7: %+v", len(ds), ds)
	}
}
