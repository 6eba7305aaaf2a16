package providers

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"switchyard/internal/jsonspan"
	"switchyard/routing"
)

// maxSSEEvent bounds one SSE line and one whole event (all its data: lines
// together) from an upstream, so a broken upstream cannot make the gateway
// hold unbounded memory (SPEC 14). Exceeding it ends the attempt as a
// server_error: before the first byte the gateway still fails over.
const maxSSEEvent = 8 << 20

// errEventTooLarge is an upstream line or event over maxSSEEvent.
var errEventTooLarge = &Error{Class: routing.ClassServerError,
	Message: "upstream SSE event exceeds 8 MiB (a line, or data: lines without the blank line that ends an event)"}

// sseReader reads Server-Sent Events line by line. It returns each event as
// soon as the blank line that ends it arrives and buffers nothing beyond the
// current event.
type sseReader struct {
	br   *bufio.Reader
	data []byte // data of the current event; reused, valid until the next call
	long []byte // assembles a line longer than the bufio buffer
	// partial: the event next returned last ended with a line the end of
	// the body cut before its line ending
	partial bool
}

func newSSEReader(r io.Reader) sseReader {
	return sseReader{br: bufio.NewReaderSize(r, 16<<10)}
}

// next returns the next event's name ("" when it had no event: line) and
// data (multi-line data joined with "\n"). Comments and events with no data
// are skipped. At the end of the body it returns io.EOF (after dispatching
// a final event that lacked its blank line).
func (r *sseReader) next() (name string, data []byte, err error) {
	r.data = r.data[:0]
	r.partial = false
	hasData := false
	for {
		line, err := r.line()
		if err != nil {
			if err == io.EOF && hasData {
				return name, r.data, nil
			}
			return "", nil, err
		}
		if len(line) == 0 {
			if hasData {
				return name, r.data, nil
			}
			name = ""
			continue
		}
		if line[0] == ':' {
			continue // comment / keep-alive
		}
		field, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(field) {
		case "event":
			name = internEvent(value)
		case "data":
			if len(r.data)+len(value)+1 > maxSSEEvent {
				return "", nil, errEventTooLarge
			}
			if hasData {
				r.data = append(r.data, '\n')
			}
			r.data = append(r.data, value...)
			hasData = true
		}
	}
}

// line returns one line without its line ending.
func (r *sseReader) line() ([]byte, error) {
	line, err := r.br.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		r.long = append(r.long[:0], line...)
		for err == bufio.ErrBufferFull {
			if len(r.long) > maxSSEEvent {
				return nil, errEventTooLarge
			}
			line, err = r.br.ReadSlice('\n')
			r.long = append(r.long, line...)
		}
		line = r.long
	}
	if err != nil && (err != io.EOF || len(line) == 0) {
		return nil, err
	}
	r.partial = err == io.EOF
	line = bytes.TrimSuffix(line, []byte{'\n'})
	return bytes.TrimSuffix(line, []byte{'\r'}), nil
}

// internEvent returns the event name without allocating for known names.
func internEvent(b []byte) string {
	switch string(b) {
	case "":
		return ""
	case "message_start":
		return "message_start"
	case "content_block_start":
		return "content_block_start"
	case "content_block_delta":
		return "content_block_delta"
	case "content_block_stop":
		return "content_block_stop"
	case "message_delta":
		return "message_delta"
	case "message_stop":
		return "message_stop"
	case "ping":
		return "ping"
	case "error":
		return "error"
	}
	return string(b)
}

// appendData frames data as one SSE event with no name.
func appendData(dst, data []byte) []byte {
	return appendEvent(dst, "", data)
}

// appendEvent frames data as one SSE event; multi-line data becomes one
// data: line per line, as the SSE grammar requires.
func appendEvent(dst []byte, name string, data []byte) []byte {
	if name != "" {
		dst = append(dst, "event: "...)
		dst = append(dst, name...)
		dst = append(dst, '\n')
	}
	for {
		dst = append(dst, "data: "...)
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			dst = append(dst, data...)
			break
		}
		dst = append(dst, data[:i]...)
		dst = append(dst, '\n')
		data = data[i+1:]
	}
	return append(dst, '\n', '\n')
}

var doneData = []byte("[DONE]")

// isDone reports the OpenAI end-of-stream sentinel.
func isDone(data []byte) bool { return bytes.Equal(bytes.TrimSpace(data), doneData) }

// converter turns upstream SSE events into the client's framed events; one
// implementation per (client format, upstream format) pair.
type converter interface {
	// event handles one upstream event. It returns the framed bytes to relay
	// (nil to relay nothing) and whether the stream is complete.
	event(name string, data []byte) (out []byte, done bool, err error)
	// eof is called when the upstream body ends before event reported done;
	// it returns final bytes to relay or an error when the stream was cut.
	eof() ([]byte, error)
	usage() Usage
}

// httpStream is an EventStream over an upstream HTTP response body.
type httpStream struct {
	// immutable after construction
	ctx  context.Context
	body io.ReadCloser
	conv converter

	// owned by the goroutine calling Next
	r     sseReader
	first []byte // the event read by Do to measure TTFB, returned first
	done  bool

	closed atomic.Bool
}

// startStream wraps a 2xx streaming response and reads its first event, so
// a stream that fails before any event is still an attempt error the
// gateway can fail over from, and TTFB is measured to the first event.
func startStream(ctx context.Context, resp *http.Response, conv converter, start time.Time, h http.Header) (*Response, error) {
	s := &httpStream{ctx: ctx, body: resp.Body, conv: conv, r: newSSEReader(resp.Body)}
	first, err := s.Next()
	if err != nil {
		s.Close()
		if err == io.EOF {
			return nil, &Error{Status: resp.StatusCode, Class: routing.ClassServerError, Message: "upstream stream ended before its first event"}
		}
		return nil, err
	}
	s.first = first
	return &Response{Status: resp.StatusCode, Header: h, Stream: s, TTFB: time.Since(start)}, nil
}

// Ended implements EventStream: the converter saw the terminal event, or
// the upstream ended and the converter's last events were returned.
func (s *httpStream) Ended() bool { return s.done && s.first == nil }

// Next implements EventStream.
func (s *httpStream) Next() ([]byte, error) {
	if s.first != nil {
		out := s.first
		s.first = nil
		return out, nil
	}
	for !s.done {
		if s.closed.Load() {
			return nil, &Error{Class: routing.ClassCanceled, Message: "stream closed"}
		}
		name, data, err := s.r.next()
		if err == io.EOF {
			s.done = true
			out, err := s.conv.eof()
			if err != nil {
				return nil, err
			}
			if len(out) > 0 {
				return out, nil
			}
			break
		}
		if err != nil {
			return nil, s.readError(err)
		}
		if s.r.partial && !isDone(data) && !jsonspan.Valid(data) {
			// the body ended cleanly inside the event's last line: a cut,
			// not an event (the SSE standard discards it too)
			s.done = true
			return nil, &Error{Class: routing.ClassNetwork, Message: "upstream closed the stream mid-event"}
		}
		out, done, err := s.conv.event(name, data)
		if err != nil {
			s.done = true
			return nil, err
		}
		s.done = done
		if len(out) > 0 {
			return out, nil
		}
	}
	return nil, io.EOF
}

func (s *httpStream) readError(err error) error {
	if errors.Is(err, errEventTooLarge) {
		return err
	}
	return streamReadError(s.ctx, s.closed.Load(), err, "upstream closed the stream mid-event")
}

// streamReadError classifies a failed read of an upstream stream: canceled
// when the stream was closed on purpose, else as a transport failure of
// ctx's attempt, a cut in the middle of an event or frame saying so (cut).
func streamReadError(ctx context.Context, closed bool, err error, cut string) *Error {
	if closed {
		return &Error{Class: routing.ClassCanceled, Message: "stream closed", cause: err}
	}
	e := classifyTransport(ctx.Err(), err)
	if e.Class == routing.ClassNetwork && err == io.ErrUnexpectedEOF {
		e.Message = cut
	}
	return e
}

// Usage implements EventStream.
func (s *httpStream) Usage() Usage { return s.conv.usage() }

// Close implements EventStream.
func (s *httpStream) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	return s.body.Close()
}

// relayHeaders picks the upstream headers worth relaying; nil when none.
func relayHeaders(h http.Header) http.Header {
	var out http.Header
	set := func(k, v string) {
		if v == "" {
			return
		}
		if out == nil {
			out = make(http.Header, 2)
		}
		out[k] = []string{v}
	}
	set("Openai-Processing-Ms", h.Get("Openai-Processing-Ms"))
	if id := h.Get("X-Request-Id"); id != "" {
		set("Upstream-Request-Id", id)
	} else {
		set("Upstream-Request-Id", h.Get("Request-Id")) // Anthropic
	}
	return out
}
