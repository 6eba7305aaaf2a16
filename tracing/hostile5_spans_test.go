package tracing

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"switchyard/catalog"
	"switchyard/config"
	"switchyard/routing"
)

// gen_ai.provider.name takes the well-known values of the OpenTelemetry
// GenAI semantic conventions (attribute registry, gen_ai.provider.name:
// openai, anthropic, gcp.gemini, gcp.vertex_ai, aws.bedrock, ...; "for a
// custom model, a custom friendly name"): it is the discriminator
// backends group GenAI telemetry by, so a Bedrock attempt named "bedrock"
// is not grouped with other aws.bedrock spans (SPEC 12.5).
func TestHostile5ProviderNameSemconv(t *testing.T) {
	cases := []struct{ kind, want string }{
		{"openai", "openai"},
		{"anthropic", "anthropic"},
		{"gemini", "gcp.gemini"},
		{"vertex", "gcp.vertex_ai"},
		{"bedrock", "aws.bedrock"},
		{"simulated", "simulated"},
	}
	for _, c := range cases {
		t.Run(c.kind, func(t *testing.T) {
			exp := tracetest.NewInMemoryExporter()
			tr, _ := newTracer(t, on("http://unused:4318", 1), Options{Exporter: exp})
			d := &catalog.Deployment{
				Deployment: config.Deployment{ID: "d", Model: "m", UpstreamModel: "up"},
				Provider:   &catalog.Provider{Provider: config.Provider{Name: "p-" + c.kind, Kind: c.kind}},
			}
			ctx, r := tr.StartRequest(context.Background(), httptest.NewRequest("POST", "/v1/chat/completions", nil), "/v1/chat/completions")
			_, a := r.StartAttempt(ctx, catalog.OpChat, &routing.Attempt{Deployment: d, Model: "m", N: 1})
			a.End(routing.Outcome{Status: 200, Class: routing.ClassOK}, Usage{})
			r.End(Outcome{Status: 200})
			if err := tr.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, s := range exp.GetSpans() {
				if s.SpanKind.String() != "client" {
					continue
				}
				for _, kv := range s.Attributes {
					got[string(kv.Key)] = kv.Value.Emit()
				}
			}
			if got["gen_ai.provider.name"] != c.want {
				t.Errorf("kind %s: gen_ai.provider.name = %q, want %q", c.kind, got["gen_ai.provider.name"], c.want)
			}
			if got["switchyard.provider"] != "p-"+c.kind {
				t.Errorf("switchyard.provider = %q, want the operator's name", got["switchyard.provider"])
			}
		})
	}
}

// SPEC 12.5: "no key in any span"; SPEC 15 masks what is shaped like a
// credential in every value the client chooses that the gateway writes
// down (the audit entry and the request log mask the request id, the model
// named and the end user). The server span carries three client-chosen
// values, X-Request-Id, the model named and the User-Agent, and exports
// them to a collector outside the gateway: a key pasted into one of them
// must be masked there too.
func TestHostile5SpanMasksClientCredentials(t *testing.T) {
	const key = "sk-proj-abcdefghijklmnopqrstuvwx0123456789"
	exp := tracetest.NewInMemoryExporter()
	tr, _ := newTracer(t, on("http://unused:4318", 1), Options{Exporter: exp})
	r := httptest.NewRequest("POST", "/v1/chat/completions", nil)
	r.Header.Set("User-Agent", "my-app/1.0 (token "+key+")")
	_, req := tr.StartRequest(context.Background(), r, "/v1/chat/completions")
	req.End(Outcome{Status: 404, RequestID: "req-" + key, Team: "web", RequestedModel: key})
	if err := tr.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := exp.GetSpans()
	if len(spans) != 1 {
		t.Fatalf("got %d spans, want 1", len(spans))
	}
	seen := map[string]string{}
	for _, a := range spans[0].Attributes {
		v := a.Value.Emit()
		seen[string(a.Key)] = v
		if strings.Contains(v, key[6:]) {
			t.Errorf("attribute %s = %q carries the key in clear", a.Key, v)
		}
	}
	// masked, not dropped: the first 6 characters stay (SPEC 15)
	for _, k := range []string{"user_agent.original", "switchyard.request_id", "switchyard.model.requested"} {
		if !strings.Contains(seen[k], key[:6]) {
			t.Errorf("attribute %s = %q, want the value kept with the key masked after its first 6 characters", k, seen[k])
		}
	}
}
