package telemetry

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

func sampleEntries() []*Entry {
	t0 := time.Date(2026, 12, 1, 13, 4, 5, 123456789, time.UTC)
	return []*Entry{
		{},
		{RequestID: "r-1", Node: "n", Time: t0, Team: "t", Operation: "chat", RequestedModel: "normal", Attempts: []Attempt{}},
		{
			RequestID: "r\"2\n\u2028", Node: "n2", Time: t0.In(time.FixedZone("x", 3600)), Team: "tëam", Operation: "responses", Stream: true,
			RequestedModel: "normal", RoutedModel: "hard-model", Deployment: "d1", Session: "header",
			Tier: &TierVerdict{Alias: "normal", Tier: "hard", Score: 7, Source: "classifier", Target: "hard-model",
				Signals: []Signal{{Name: "code", Points: 3, Detail: "```"}, {Name: "len", Points: 4}}},
			Attempts: []Attempt{
				{Deployment: "d0", Model: "m", Adapter: "openai", Transport: "http", Start: t0, Duration: 1500 * time.Microsecond, Status: 503, Class: "server_error", Error: "upstream said <no>"},
				{Deployment: "d1", Model: "m2", Adapter: "anthropic", Transport: "sse", Start: t0.Add(time.Millisecond), Duration: time.Second, Status: 200, Class: "ok", Fallback: true, LastResort: true, Probe: true},
			},
			FallbackReason: "server_error", Degraded: true, PromptTokens: 12, CachedTokens: 8, CacheWriteTokens: 3, CompletionTokens: 34,
			CostUSD: 0.0000012345, Status: 200, Error: "", DurationMs: 12.345, OverheadMs: 1e-7,
		},
		{CostUSD: 3e21, DurationMs: -0.5, Status: 429, Error: "over \x00 limit \xff"},
	}
}

// TestEntryAppendJSONDecodesAsMarshal: what AppendJSON writes decodes to the
// same entry that json.Marshal's output does, field for field.
func TestEntryAppendJSONDecodesAsMarshal(t *testing.T) {
	for i, e := range sampleEntries() {
		checkEntryJSON(t, i, e)
	}
}

func checkEntryJSON(t *testing.T, i int, e *Entry) {
	t.Helper()
	got := e.AppendJSON(nil)
	want, err := json.Marshal(e)
	if err != nil {
		return // encoding/json refuses it (NaN, a year past 9999): nothing to match
	}
	var a, b Entry
	if err := json.Unmarshal(got, &a); err != nil {
		t.Fatalf("entry %d: AppendJSON wrote invalid JSON (%v): %s", i, err, got)
	}
	if err := json.Unmarshal(want, &b); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("entry %d decodes differently:\n got %s\nwant %s", i, got, want)
	}
	var ma, mb map[string]any // the same keys present and omitted
	_ = json.Unmarshal(got, &ma)
	_ = json.Unmarshal(want, &mb)
	if !reflect.DeepEqual(ma, mb) {
		t.Fatalf("entry %d: fields differ:\n got %s\nwant %s", i, got, want)
	}
}

func FuzzEntryAppendJSON(f *testing.F) {
	f.Add("r", "team", "model", "err", 200, 1.5, 0.001, int64(1500), true)
	f.Add("\xff\"", "", "\u2028", "", 0, 1e-9, 1e22, int64(-1), false)
	f.Fuzz(func(t *testing.T, id, team, model, errText string, status int, dur, cost float64, ns int64, stream bool) {
		e := &Entry{RequestID: id, Team: team, RequestedModel: model, RoutedModel: model, Error: errText, Status: status,
			DurationMs: dur, CostUSD: cost, Stream: stream, Time: time.Unix(0, ns).UTC(),
			Attempts: []Attempt{{Deployment: team, Error: errText, Duration: time.Duration(ns), Start: time.Unix(0, ns)}}}
		checkEntryJSON(t, 0, e)
	})
}

func BenchmarkEntryJSON(b *testing.B) {
	e := sampleEntries()[2]
	b.Run("AppendJSON", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			buf = e.AppendJSON(buf[:0])
		}
	})
	b.Run("json.Marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = json.Marshal(e)
		}
	})
}

// TestAppendJSONMasksClientCredentials: a credential a client put in the
// values it chooses (X-Request-Id, the end user id, the model name) does
// not reach the audit entry in clear (SPEC 15); ordinary values stay as
// they are.
func TestAppendJSONMasksClientCredentials(t *testing.T) {
	const secret = "sk-proj-SECRETSECRETSECRET1234"
	e := &Entry{RequestID: "req-" + secret, User: "u " + secret, RequestedModel: "gpt " + secret, Team: "t", Operation: "chat"}
	if got := string(e.AppendJSON(nil)); strings.Contains(got, "SECRETSECRET") {
		t.Fatalf("a client-chosen credential reached the entry in clear: %s", got)
	}
	e = &Entry{RequestID: "req-1", User: "alice", RequestedModel: "gpt-4o", Team: "t", Operation: "chat"}
	got := string(e.AppendJSON(nil))
	for _, v := range []string{`"request_id":"req-1"`, `"user":"alice"`, `"requested_model":"gpt-4o"`} {
		if !strings.Contains(got, v) {
			t.Fatalf("%s: %s missing", got, v)
		}
	}
}
