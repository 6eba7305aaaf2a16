package providers

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"switchyard/wire"
)

// TestBedrockToolHistoryWithoutTools: a conversation that holds tool calls
// and results but offers no tools this turn (a summary or side question
// over an agent's transcript) is answered: Converse refuses toolUse and
// toolResult blocks without a toolConfig, so they go as text, and no tool
// is declared that the client did not offer (the model cannot call one).
// With tools offered, the blocks stay blocks.
func TestBedrockToolHistoryWithoutTools(t *testing.T) {
	const history = `"messages":[{"role":"user","content":"weather in Paris?"},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},` +
		`{"role":"tool","tool_call_id":"call_1","content":"18C, sunny"},` +
		`{"role":"user","content":"summarize the conversation"}]`
	f, srv := newBedrockFake(t, nil)
	p := bedrockProvider(srv.URL)
	a := newBedrockAdapter(t, p)
	d := deployment(p, "anthropic.claude-3-5-sonnet-20241022-v2:0")

	for _, stream := range []bool{false, true} {
		body := `{"model":"public",` + history + `}`
		if stream {
			body = `{"model":"public","stream":true,` + history + `}`
		}
		resp, err := a.Do(context.Background(), d, chatReq(t, body, wire.FormatOpenAI))
		if err != nil {
			t.Fatalf("stream=%v: %v", stream, err)
		}
		if stream {
			if _, err := drain(t, resp.Stream); err != nil {
				t.Fatal(err)
			}
		}
	}
	calls := f.Calls()
	if len(calls) != 2 {
		t.Fatalf("%d calls reached the model, want 2", len(calls))
	}
	sent := string(calls[0].Body)
	for _, absent := range []string{`"toolUse"`, `"toolResult"`, `"toolConfig"`} {
		if strings.Contains(sent, absent) {
			t.Errorf("sent %s without tools offered: %s", absent, sent)
		}
	}
	var cv cvRequest
	if err := json.Unmarshal(calls[0].Body, &cv); err != nil {
		t.Fatal(err)
	}
	text := ""
	for _, m := range cv.Messages {
		for _, b := range m.Content {
			if b.Text != nil {
				text += m.Role + ": " + *b.Text + "\n"
			}
		}
	}
	for _, want := range []string{"get_weather", `{"city":"Paris"}`, "call_1", "18C, sunny"} {
		if !strings.Contains(text, want) {
			t.Errorf("the transcript sent lost %q:\n%s", want, text)
		}
	}

	// tools offered: blocks as they are
	withTools := `{"model":"public","tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}],` + history + `}`
	if _, err := a.Do(context.Background(), d, chatReq(t, withTools, wire.FormatOpenAI)); err != nil {
		t.Fatal(err)
	}
	last := string(f.Calls()[2].Body)
	if !strings.Contains(last, `"toolUse"`) || !strings.Contains(last, `"toolResult"`) || !strings.Contains(last, `"toolConfig"`) {
		t.Errorf("with tools offered the blocks changed: %s", last)
	}
}
