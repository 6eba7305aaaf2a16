package tracing

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"switchyard/catalog"
	"switchyard/redact"
	"switchyard/routing"
)

// The span attributes of SPEC 12.5: the OpenTelemetry HTTP and GenAI
// semantic conventions, and Switchyard's own under switchyard.*.
const (
	attrHTTPMethod      = attribute.Key("http.request.method")
	attrHTTPRoute       = attribute.Key("http.route")
	attrHTTPStatus      = attribute.Key("http.response.status_code")
	attrURLPath         = attribute.Key("url.path")
	attrURLScheme       = attribute.Key("url.scheme")
	attrUserAgent       = attribute.Key("user_agent.original")
	attrClientAddress   = attribute.Key("client.address")
	attrProtocolVersion = attribute.Key("network.protocol.version")
	attrErrorType       = attribute.Key("error.type")

	attrTeam           = attribute.Key("switchyard.team")
	attrModelRequested = attribute.Key("switchyard.model.requested")
	attrModelServed    = attribute.Key("switchyard.model.served")
	attrTier           = attribute.Key("switchyard.tier")
	attrAttempts       = attribute.Key("switchyard.attempts")
	attrDegraded       = attribute.Key("switchyard.degraded")
	attrRequestID      = attribute.Key("switchyard.request_id")

	attrGenAIOperation    = attribute.Key("gen_ai.operation.name")
	attrGenAIProvider     = attribute.Key("gen_ai.provider.name")
	attrGenAIRequestModel = attribute.Key("gen_ai.request.model")
	attrGenAIRespModel    = attribute.Key("gen_ai.response.model")
	attrGenAIInputTokens  = attribute.Key("gen_ai.usage.input_tokens")
	attrGenAIOutputTokens = attribute.Key("gen_ai.usage.output_tokens")
	attrDeployment        = attribute.Key("switchyard.deployment")
	attrProviderName      = attribute.Key("switchyard.provider")
	attrAttemptN          = attribute.Key("switchyard.attempt")
	attrFallback          = attribute.Key("switchyard.fallback")
	attrStream            = attribute.Key("switchyard.stream")
	attrUpstreamStatus    = attribute.Key("switchyard.upstream.status")
	attrTTFBMs            = attribute.Key("switchyard.ttfb_ms")

	attrEdgeAdmission = attribute.Key("switchyard.edge.admission")
	attrEdgePins      = attribute.Key("switchyard.edge.pins")
	attrEdgeLocal     = attribute.Key("switchyard.edge.fallback_local")
)

// Request is the server span of one client request. A nil *Request (tracing
// off) ignores every call.
type Request struct {
	span   trace.Span
	tracer trace.Tracer
}

// StartRequest continues the caller's W3C trace context from r's headers
// (a new trace when there is none) and starts the request's server span,
// named "POST /v1/chat/completions" after route. The returned context
// carries the span: derive every attempt's context from it. With t nil it
// returns ctx and nil and costs nothing.
func (t *Tracer) StartRequest(ctx context.Context, r *http.Request, route string) (context.Context, *Request) {
	if t == nil {
		return ctx, nil
	}
	ctx = t.prop.Extract(ctx, propagation.HeaderCarrier(r.Header))
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	attrs := make([]attribute.KeyValue, 0, 8)
	attrs = append(attrs,
		attrHTTPMethod.String(r.Method),
		attrHTTPRoute.String(route),
		attrURLPath.String(r.URL.Path),
		attrURLScheme.String(scheme),
		attrProtocolVersion.String(protocolVersion(r)),
	)
	if ua := r.UserAgent(); ua != "" {
		attrs = append(attrs, attrUserAgent.String(clientText(ua)))
	}
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		attrs = append(attrs, attrClientAddress.String(host))
	}
	ctx, span := t.tracer.Start(ctx, r.Method+" "+route, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
	return ctx, &Request{span: span, tracer: t.tracer}
}

func protocolVersion(r *http.Request) string {
	switch r.ProtoMajor {
	case 2:
		return "2"
	case 3:
		return "3"
	}
	return "1." + strconv.Itoa(r.ProtoMinor)
}

// clientCut is how much of a client-chosen value clientText masks: the
// SDK keeps maxAttrValue bytes of it, and a credential that starts within
// them is matched whole within this many more (the longest pattern's
// minimum, with room for a JSON-escaped or long token).
const clientCut = maxAttrValue + 256

// clientText is a value the client chose (its User-Agent, X-Request-Id or
// the model it named) as a span may carry it: masked of what is shaped like
// a credential, as the audit entry and the request log mask it (SPEC 12.5:
// no key in any span; SPEC 15). It is cut first, so a hostile megabyte
// costs the masking no more than a normal value.
func clientText(s string) string {
	if len(s) > clientCut {
		s = s[:clientCut]
	}
	return redact.Credentials(s)
}

// Outcome is what the server span records when the request ends: the
// SPEC 12.5 request attributes.
type Outcome struct {
	Status         int // the status the client got (499: it went away)
	RequestID      string
	Team           string // "" before authentication
	RequestedModel string // the model the client named
	ServedModel    string // the public model that served; "" when none did
	Tier           string // easy | hard; "" without a tier route
	Attempts       int
	Degraded       bool
}

// End sets the request's attributes and ends its server span. A status of
// 500 and above marks the span as an error (the HTTP server convention:
// a 4xx is the client's, not the server's).
func (r *Request) End(o Outcome) {
	if r == nil {
		return
	}
	s := r.span
	attrs := make([]attribute.KeyValue, 0, 10)
	attrs = append(attrs,
		attrHTTPStatus.Int(o.Status),
		attrRequestID.String(clientText(o.RequestID)),
		attrAttempts.Int(o.Attempts),
		attrDegraded.Bool(o.Degraded),
	)
	if o.Team != "" {
		attrs = append(attrs, attrTeam.String(o.Team))
	}
	if o.RequestedModel != "" {
		attrs = append(attrs, attrModelRequested.String(clientText(o.RequestedModel)))
	}
	if o.ServedModel != "" {
		attrs = append(attrs, attrModelServed.String(o.ServedModel))
	}
	if o.Tier != "" {
		attrs = append(attrs, attrTier.String(o.Tier))
	}
	if o.Status >= 500 {
		code := strconv.Itoa(o.Status)
		attrs = append(attrs, attrErrorType.String(code))
		s.SetStatus(codes.Error, code)
	}
	s.SetAttributes(attrs...)
	s.End()
}

// EdgeState records the edge-state round trip (SPEC 9: admission and pin
// reads in one call) as a child span from start to now: whether the team
// admission was part of it, how many pins it read, and whether it was
// answered by the node-local fallback instead of Redis.
func (r *Request) EdgeState(ctx context.Context, start time.Time, admission bool, pins int, local bool) {
	if r == nil {
		return
	}
	_, s := r.tracer.Start(ctx, "switchyard.edge_state", trace.WithSpanKind(trace.SpanKindInternal), trace.WithTimestamp(start),
		trace.WithAttributes(attrEdgeAdmission.Bool(admission), attrEdgePins.Int(pins), attrEdgeLocal.Bool(local)))
	s.End()
}

// Attempt is the client span of one upstream attempt. A nil *Attempt
// (tracing off) ignores every call.
type Attempt struct {
	span trace.Span
}

// StartAttempt starts the client span of attempt a, for operation op, as a
// child of the request span in ctx, named after the GenAI convention
// "{operation} {upstream model}". The returned context carries it: pass it
// to the adapter, whose traceparent then names this attempt. With r nil it
// returns ctx and nil.
func (r *Request) StartAttempt(ctx context.Context, op catalog.Operation, a *routing.Attempt) (context.Context, *Attempt) {
	if r == nil {
		return ctx, nil
	}
	d := a.Deployment
	opName := genAIOperation(op)
	model := d.UpstreamModel
	if model == "" {
		model = d.Model
	}
	attrs := []attribute.KeyValue{
		attrGenAIOperation.String(opName),
		attrGenAIRequestModel.String(model),
		attrDeployment.String(d.ID),
		attrAttemptN.Int(a.N),
		attrModelServed.String(a.Model),
	}
	if d.Provider != nil {
		// the kind and the operator's name for it; never its URL or key
		attrs = append(attrs, attrGenAIProvider.String(genAIProvider(d.Provider.Kind)), attrProviderName.String(d.Provider.Name))
	}
	if a.Fallback {
		attrs = append(attrs, attrFallback.Bool(true))
	}
	ctx, s := r.tracer.Start(ctx, opName+" "+model, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	return ctx, &Attempt{span: s}
}

// genAIOperation maps an operation to gen_ai.operation.name. Image
// generation has no value of its own in the conventions; generate_content
// is theirs for multimodal generation.
func genAIOperation(op catalog.Operation) string {
	switch op {
	case catalog.OpEmbeddings:
		return "embeddings"
	case catalog.OpImages:
		return "generate_content"
	}
	return "chat"
}

// genAIProvider maps a provider kind to gen_ai.provider.name: the
// well-known values of the GenAI semantic conventions, which backends
// group GenAI telemetry by (aws.bedrock, gcp.gemini, gcp.vertex_ai); a
// kind they do not name (simulated) keeps its own name, the conventions'
// "custom friendly name".
func genAIProvider(kind string) string {
	switch kind {
	case "bedrock":
		return "aws.bedrock"
	case "gemini":
		return "gcp.gemini"
	case "vertex":
		return "gcp.vertex_ai"
	}
	return kind
}

// Usage is what an upstream reported for an attempt.
type Usage struct {
	InputTokens, OutputTokens int
	// Body is the sync response body or a stream's first event; End reads
	// gen_ai.response.model from it (ResponseModel), only when tracing is on.
	Body []byte
	// Stream marks a streamed attempt: its span ended with the stream.
	Stream bool
}

// End records the attempt's outcome and ends its span: the upstream status,
// time to first byte, usage, and for a failure error.type = the outcome
// class (SPEC 7.4) with an error status. o.Message is not recorded: an
// upstream message may quote the prompt.
func (a *Attempt) End(o routing.Outcome, u Usage) {
	if a == nil {
		return
	}
	s := a.span
	attrs := make([]attribute.KeyValue, 0, 8)
	if o.Status > 0 {
		attrs = append(attrs, attrUpstreamStatus.Int(o.Status))
	}
	if o.TTFB > 0 {
		attrs = append(attrs, attrTTFBMs.Float64(float64(o.TTFB.Microseconds())/1000))
	}
	if u.Stream {
		attrs = append(attrs, attrStream.Bool(true))
	}
	if u.InputTokens > 0 || u.OutputTokens > 0 {
		attrs = append(attrs, attrGenAIInputTokens.Int(u.InputTokens), attrGenAIOutputTokens.Int(u.OutputTokens))
	}
	if m := ResponseModel(u.Body); m != "" {
		attrs = append(attrs, attrGenAIRespModel.String(m))
	}
	if o.Class != routing.ClassOK {
		class := o.Class.String()
		attrs = append(attrs, attrErrorType.String(class))
		s.SetStatus(codes.Error, class)
	}
	s.SetAttributes(attrs...)
	s.End()
}
