package providers

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"switchyard/wire"
)

// TestHostile4BedrockToolUseIDs: Converse takes a toolUseId of 1 to 64
// characters matching [a-zA-Z0-9_-]+ (Bedrock API reference, "ToolUseBlock"
// and "ToolResultBlock": toolUseId, Length Constraints and Pattern) and
// answers any other with a ValidationException. Tool call ids a client
// replays come from whichever deployment served the earlier turn: other
// OpenAI-compatible servers write ids such as "functions.get_weather:0",
// and frameworks longer ones, so a conversation that fails over to a
// Bedrock deployment was refused on every later turn. The translation
// rewrites such an id into the allowed shape, the same way for the call and
// its result (so they still pair up), and distinct ids stay distinct.
func TestHostile4BedrockToolUseIDs(t *testing.T) {
	long := "call_" + strings.Repeat("x", 70)
	ids := []string{"functions.get_weather:0", "functions.get_weather:1", long, long + "y", "call_ok-1"}
	var calls, results []string
	for _, id := range ids {
		calls = append(calls, `{"id":"`+id+`","type":"function","function":{"name":"get_weather","arguments":"{}"}}`)
		results = append(results, `{"role":"tool","tool_call_id":"`+id+`","content":"sunny"}`)
	}
	body := `{"model":"m","messages":[{"role":"user","content":"weather?"},` +
		`{"role":"assistant","content":null,"tool_calls":[` + strings.Join(calls, ",") + `]},` +
		strings.Join(results, ",") + `],"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]}`
	req := bedrockClientReq(t, []byte(body), wire.FormatOpenAI, false)
	cv, err := converseRequest(req, "anthropic.claude")
	if err != nil {
		t.Fatal(err)
	}
	valid := regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
	var useIDs, resultIDs []string
	for _, m := range cv.Messages {
		for _, b := range m.Content {
			if b.ToolUse != nil {
				useIDs = append(useIDs, b.ToolUse.ToolUseID)
			}
			if b.ToolResult != nil {
				resultIDs = append(resultIDs, b.ToolResult.ToolUseID)
			}
		}
	}
	out, _ := json.Marshal(cv)
	if len(useIDs) != len(ids) || len(resultIDs) != len(ids) {
		t.Fatalf("tool uses %v, results %v\n%s", useIDs, resultIDs, out)
	}
	seen := map[string]bool{}
	for i := range ids {
		if !valid.MatchString(useIDs[i]) || !valid.MatchString(resultIDs[i]) {
			t.Fatalf("id %q went to Converse as toolUse %q / toolResult %q, outside [a-zA-Z0-9_-]{1,64}", ids[i], useIDs[i], resultIDs[i])
		}
		if useIDs[i] != resultIDs[i] {
			t.Fatalf("id %q: toolUse %q and toolResult %q no longer pair up", ids[i], useIDs[i], resultIDs[i])
		}
		if seen[useIDs[i]] {
			t.Fatalf("two ids became %q", useIDs[i])
		}
		seen[useIDs[i]] = true
	}
	if useIDs[4] != "call_ok-1" {
		t.Fatalf("a valid id was rewritten: %q", useIDs[4])
	}
}
