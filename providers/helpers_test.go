package providers

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"

	"switchyard/catalog"
	"switchyard/config"
	"switchyard/routing"
	"switchyard/wire"
)

// assertJSON fails unless got and want are the same JSON value.
func assertJSON(t *testing.T, got []byte, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("got invalid JSON %s: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("want invalid JSON %s: %v", want, err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("JSON differs\n got: %s\nwant: %s", compact(got), compact([]byte(want)))
	}
}

func compact(b []byte) string {
	var buf bytes.Buffer
	if json.Compact(&buf, b) != nil {
		return string(b)
	}
	return buf.String()
}

// sseEvent is one parsed SSE event.
type sseEvent struct{ name, data string }

// parseSSE splits framed bytes into events, checking the framing.
func parseSSE(t *testing.T, b []byte) []sseEvent {
	t.Helper()
	r := newSSEReader(bytes.NewReader(b))
	var out []sseEvent
	for {
		name, data, err := r.next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("bad SSE %q: %v", b, err)
		}
		out = append(out, sseEvent{name, string(data)})
	}
}

// assertEvents compares events by name and JSON value ("[DONE]" literally).
func assertEvents(t *testing.T, got []sseEvent, want []sseEvent) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d events, want %d:\n%s", len(got), len(want), dumpEvents(got))
	}
	for i := range want {
		if got[i].name != want[i].name {
			t.Fatalf("event %d name %q, want %q\n%s", i, got[i].name, want[i].name, dumpEvents(got))
		}
		if want[i].data == "[DONE]" || got[i].data == "[DONE]" {
			if got[i].data != want[i].data {
				t.Fatalf("event %d data %q, want %q", i, got[i].data, want[i].data)
			}
			continue
		}
		assertJSON(t, []byte(got[i].data), want[i].data)
	}
}

func dumpEvents(evs []sseEvent) string {
	var sb strings.Builder
	for _, e := range evs {
		sb.WriteString(e.name + " " + e.data + "\n")
	}
	return sb.String()
}

// drain reads a stream to its end, returning everything relayed.
func drain(t *testing.T, s EventStream) ([]byte, error) {
	t.Helper()
	var all []byte
	for {
		ev, err := s.Next()
		if errors.Is(err, io.EOF) {
			return all, nil
		}
		if err != nil {
			return all, err
		}
		all = append(all, ev...)
	}
}

func parse(t *testing.T, body string, op catalog.Operation, f wire.Format) *wire.Request {
	t.Helper()
	r, err := wire.Parse([]byte(body), op, f)
	if err != nil {
		t.Fatalf("wire.Parse: %v", err)
	}
	return r
}

func chatReq(t *testing.T, body string, f wire.Format) *Request {
	t.Helper()
	c := parse(t, body, catalog.OpChat, f)
	return &Request{Op: catalog.OpChat, Stream: c.Stream, Client: c, WantUsage: c.IncludeUsage, PromptTokens: c.PromptTokens()}
}

func deployment(provider *catalog.Provider, upstream string) *catalog.Deployment {
	return &catalog.Deployment{Deployment: config.Deployment{ID: "d1", Model: "public", UpstreamModel: upstream, Provider: provider.Name}, Provider: provider, Ops: catalog.OpChat | catalog.OpEmbeddings | catalog.OpImages}
}

func wantClass(t *testing.T, err error, c routing.Class) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("want *Error of class %s, got %T %v", c, err, err)
	}
	if e.Class != c {
		t.Fatalf("class %s, want %s (%v)", e.Class, c, e)
	}
	return e
}
