package providers

import (
	"io"
	"strings"
	"testing"

	"switchyard/wire"
)

func TestSSEReader(t *testing.T) {
	long := strings.Repeat("x", 40<<10) // longer than the bufio buffer
	in := ": comment\n\n" +
		"event: message_start\r\ndata: {\"a\":1}\r\n\r\n" +
		"data: line1\ndata:line2\nid: 7\nretry: 10\n\n" +
		"event: ignored-without-data\n\n" +
		"data: " + long + "\n\n" +
		"data: tail-without-blank-line"
	r := newSSEReader(strings.NewReader(in))
	want := []sseEvent{
		{"message_start", `{"a":1}`},
		{"", "line1\nline2"},
		{"", long},
		{"", "tail-without-blank-line"},
	}
	for i, w := range want {
		name, data, err := r.next()
		if err != nil || name != w.name || string(data) != w.data {
			t.Fatalf("event %d: %q %q %v", i, name, wire.Truncate(string(data), 40), err)
		}
	}
	if _, _, err := r.next(); err != io.EOF {
		t.Fatalf("want EOF, got %v", err)
	}
}

func TestAppendEventFraming(t *testing.T) {
	if got := string(appendEvent(nil, "ping", []byte(`{"type":"ping"}`))); got != "event: ping\ndata: {\"type\":\"ping\"}\n\n" {
		t.Fatalf("%q", got)
	}
	if got := string(appendData(nil, []byte("a\nb"))); got != "data: a\ndata: b\n\n" {
		t.Fatalf("%q", got)
	}
}
