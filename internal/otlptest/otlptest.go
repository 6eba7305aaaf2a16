// Package otlptest is an in-process OTLP/HTTP trace receiver for tests: it
// decodes the protobuf export requests a real OTLP exporter sends to
// POST /v1/traces and keeps the spans, flattened, for assertions. It can
// also play a collector that is down (every export refused) or slow (every
// export held until released). Loopback only; every wait is bounded by the
// request's context.
package otlptest

import (
	"compress/gzip"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	common "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Span is one received span with its ids in hex and its attributes by key.
type Span struct {
	Name         string
	TraceID      string
	SpanID       string
	ParentSpanID string // "" for a root span
	Kind         tracepb.Span_SpanKind
	StatusCode   tracepb.Status_StatusCode
	Attrs        map[string]any // string, bool, int64, float64
	Resource     map[string]any
	Start, End   uint64 // unix nanoseconds
}

// Receiver is an OTLP/HTTP trace receiver on a loopback port.
type Receiver struct {
	srv *httptest.Server

	mu      sync.Mutex
	spans   []Span
	exports int
	fail    bool
	discard bool          // accept without decoding (benchmarks: the harness costs nothing)
	hold    chan struct{} // non-nil: exports wait on it (a slow collector)
}

// New starts a receiver; Close stops it.
func New() *Receiver {
	r := &Receiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	return r
}

// URL is the collector's base URL (the exporter appends /v1/traces).
func (r *Receiver) URL() string { return r.srv.URL }

// Close stops the receiver, releasing any held export first.
func (r *Receiver) Close() {
	r.Release()
	r.srv.Close()
}

// Fail makes every later export answer 400 (a collector that refuses the
// data; not retryable, so the exporter gives up on the batch at once).
func (r *Receiver) Fail(on bool) {
	r.mu.Lock()
	r.fail = on
	r.mu.Unlock()
}

// Discard makes later exports be read and accepted without being decoded
// or kept, so a benchmark measures the exporting side only.
func (r *Receiver) Discard() {
	r.mu.Lock()
	r.discard = true
	r.mu.Unlock()
}

// Hold makes later exports wait until Release or until their request is
// cancelled (a collector that does not answer).
func (r *Receiver) Hold() {
	r.mu.Lock()
	if r.hold == nil {
		r.hold = make(chan struct{})
	}
	r.mu.Unlock()
}

// Release lets held exports through and stops holding.
func (r *Receiver) Release() {
	r.mu.Lock()
	if r.hold != nil {
		close(r.hold)
		r.hold = nil
	}
	r.mu.Unlock()
}

// Spans returns a copy of every span received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Exports is the number of export requests accepted.
func (r *Receiver) Exports() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.exports
}

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
		http.Error(w, "want POST /v1/traces", http.StatusNotFound)
		return
	}
	r.mu.Lock()
	hold, fail, discard := r.hold, r.fail, r.discard
	r.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-req.Context().Done():
			return
		}
	}
	if fail {
		http.Error(w, "collector refuses", http.StatusBadRequest)
		return
	}
	var body io.Reader = http.MaxBytesReader(w, req.Body, 64<<20)
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	raw, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if discard {
		r.mu.Lock()
		r.exports++
		r.mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		return
	}
	var ex coltrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(raw, &ex); err != nil {
		http.Error(w, "not an OTLP protobuf export request: "+err.Error(), http.StatusBadRequest)
		return
	}
	var got []Span
	for _, rs := range ex.GetResourceSpans() {
		res := attrs(rs.GetResource().GetAttributes())
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				got = append(got, Span{
					Name: s.GetName(), TraceID: hex.EncodeToString(s.GetTraceId()), SpanID: hex.EncodeToString(s.GetSpanId()),
					ParentSpanID: hex.EncodeToString(s.GetParentSpanId()), Kind: s.GetKind(), StatusCode: s.GetStatus().GetCode(),
					Attrs: attrs(s.GetAttributes()), Resource: res, Start: s.GetStartTimeUnixNano(), End: s.GetEndTimeUnixNano(),
				})
			}
		}
	}
	r.mu.Lock()
	r.spans = append(r.spans, got...)
	r.exports++
	r.mu.Unlock()
	out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func attrs(kvs []*common.KeyValue) map[string]any {
	m := make(map[string]any, len(kvs))
	for _, kv := range kvs {
		v := kv.GetValue()
		switch v.GetValue().(type) {
		case *common.AnyValue_StringValue:
			m[kv.GetKey()] = v.GetStringValue()
		case *common.AnyValue_BoolValue:
			m[kv.GetKey()] = v.GetBoolValue()
		case *common.AnyValue_IntValue:
			m[kv.GetKey()] = v.GetIntValue()
		case *common.AnyValue_DoubleValue:
			m[kv.GetKey()] = v.GetDoubleValue()
		default:
			m[kv.GetKey()] = v.String()
		}
	}
	return m
}
