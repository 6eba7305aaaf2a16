package providers

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"

	"switchyard/routing"
)

// maxFrame bounds one event-stream frame from an upstream (SPEC 14): the
// SDK's decoder trusts the frame's declared lengths, so the reader checks
// them first and hands the decoder at most this many bytes. A ConverseStream
// frame is a few hundred bytes; one over the bound ends the attempt as a
// server_error.
const maxFrame = 1 << 20

// maxFrameHeaders bounds a frame's headers section: ConverseStream frames
// carry three short headers, and the decoder allocates per header, so a
// frame of a million one-byte headers must not get through.
const maxFrameHeaders = 16 << 10

// event-stream framing: total length, headers length, prelude CRC; the
// message CRC ends the frame.
const (
	framePrelude = 12
	frameMinLen  = framePrelude + 4
)

// frameReader reads AWS event-stream frames one at a time with the SDK's
// decoder, which checks both CRCs. It buffers nothing beyond one frame.
type frameReader struct {
	src     *sourceReader
	br      *bufio.Reader
	dec     *eventstream.Decoder
	payload []byte // reused for each frame's payload
}

// sourceReader remembers the body's last read error, so a transport
// failure inside a frame (a reset, the client's cancellation) is told
// apart from a malformed frame the decoder refused.
type sourceReader struct {
	r   io.Reader
	err error
}

func (s *sourceReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && err != io.EOF {
		s.err = err
	}
	return n, err
}

func newFrameReader(r io.Reader) *frameReader {
	src := &sourceReader{r: r}
	return &frameReader{src: src, br: bufio.NewReaderSize(src, 16<<10), dec: eventstream.NewDecoder()}
}

// errFrame is a malformed or oversized frame: the upstream is broken.
func errFrame(format string, args ...any) *Error {
	return &Error{Class: routing.ClassServerError, Message: "upstream event stream: " + fmt.Sprintf(format, args...)}
}

// next returns the next frame. io.EOF at a clean end between frames;
// io.ErrUnexpectedEOF when the body ends inside one; an *Error for a frame
// that is malformed, fails its CRC or exceeds maxFrame. The message's
// payload is valid until the next call.
func (f *frameReader) next() (eventstream.Message, error) {
	prelude, err := f.br.Peek(framePrelude)
	if err != nil {
		if err == io.EOF && len(prelude) > 0 {
			err = io.ErrUnexpectedEOF
		}
		return eventstream.Message{}, err
	}
	total := binary.BigEndian.Uint32(prelude[0:4])
	headers := binary.BigEndian.Uint32(prelude[4:8])
	switch {
	case total > maxFrame:
		return eventstream.Message{}, errFrame("frame of %d bytes exceeds %d", total, maxFrame)
	case headers > maxFrameHeaders:
		return eventstream.Message{}, errFrame("frame headers of %d bytes exceed %d", headers, maxFrameHeaders)
	case total < frameMinLen || headers > total-frameMinLen:
		return eventstream.Message{}, errFrame("frame lengths %d/%d are inconsistent", total, headers)
	}
	m, err := f.dec.Decode(io.LimitReader(f.br, int64(total)), f.payload[:0])
	if err != nil {
		if f.src.err != nil {
			return eventstream.Message{}, f.src.err // a transport error, classified by the caller
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return eventstream.Message{}, io.ErrUnexpectedEOF
		}
		return eventstream.Message{}, errFrame("%v", err)
	}
	if cap(m.Payload) <= 64<<10 {
		f.payload = m.Payload[:0]
	}
	return m, nil
}

// frameHeader is a string header of a frame ("" when absent).
func frameHeader(m *eventstream.Message, name string) string {
	if v := m.Headers.Get(name); v != nil {
		if s, ok := v.(eventstream.StringValue); ok {
			return string(s)
		}
		return v.String()
	}
	return ""
}

// bedrockEvents turns frames into Messages events, then into the client's
// SSE events: ConverseStream events through the pivot translator, exception
// and error frames into a classified *Error.
type bedrockEvents struct {
	pivot  *converseToAnthropicStream
	client converter
}

// frame handles one frame: framed client bytes, and whether the stream is
// complete.
func (c *bedrockEvents) frame(m *eventstream.Message) ([]byte, bool, error) {
	switch frameHeader(m, ":message-type") {
	case "event":
		evs, done, err := c.pivot.event(frameHeader(m, ":event-type"), m.Payload)
		if err != nil {
			return nil, false, err
		}
		return c.relay(evs, done)
	case "exception":
		return nil, false, bedrockStreamException(frameHeader(m, ":exception-type"), m.Payload)
	case "error":
		msg := frameHeader(m, ":error-message")
		if msg == "" {
			msg = "upstream sent an error frame"
		}
		return nil, false, &Error{Class: routing.ClassServerError, Type: frameHeader(m, ":error-code"), Message: msg}
	}
	return nil, false, nil // an unknown message type is skipped, as the SDK does
}

// relay hands Messages events to the client converter.
func (c *bedrockEvents) relay(evs []anEventOut, done bool) ([]byte, bool, error) {
	var out []byte
	for _, ev := range evs {
		b, end, err := c.client.event(ev.name, ev.data)
		if err != nil {
			return nil, false, err
		}
		out = append(out, b...)
		done = done || end
	}
	return out, done, nil
}

func (c *bedrockEvents) eof() ([]byte, error) {
	evs, err := c.pivot.eof()
	if err != nil {
		return nil, err
	}
	out, _, err := c.relay(evs, true)
	return out, err
}

// bedrockStream is an EventStream over a converse-stream response body,
// translated frame by frame as frames arrive.
type bedrockStream struct {
	// immutable after construction
	ctx  context.Context
	body io.ReadCloser
	ev   *bedrockEvents

	// owned by the goroutine calling Next
	r     *frameReader
	first []byte
	done  bool

	closed atomic.Bool
}

// startBedrockStream wraps a 2xx converse-stream response and reads until
// its first client event, so a stream that fails (or is filtered) before
// any content is still an attempt error the gateway can fail over from.
func startBedrockStream(ctx context.Context, resp *http.Response, ev *bedrockEvents, start time.Time, h http.Header) (*Response, error) {
	s := &bedrockStream{ctx: ctx, body: resp.Body, ev: ev, r: newFrameReader(resp.Body)}
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

// Next implements EventStream.
func (s *bedrockStream) Next() ([]byte, error) {
	if s.first != nil {
		out := s.first
		s.first = nil
		return out, nil
	}
	for !s.done {
		if s.closed.Load() {
			return nil, &Error{Class: routing.ClassCanceled, Message: "stream closed"}
		}
		m, err := s.r.next()
		if err == io.EOF {
			s.done = true
			out, err := s.ev.eof()
			if err != nil {
				return nil, err
			}
			if len(out) > 0 {
				return out, nil
			}
			break
		}
		if err != nil {
			s.done = true
			return nil, s.readError(err)
		}
		out, done, err := s.ev.frame(&m)
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

func (s *bedrockStream) readError(err error) error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return streamReadError(s.ctx, s.closed.Load(), err, "upstream closed the stream mid-frame")
}

// Ended implements EventStream.
func (s *bedrockStream) Ended() bool { return s.done && s.first == nil }

// Usage implements EventStream: Bedrock's own counts, cache reads and
// writes included (SPEC 10.2).
func (s *bedrockStream) Usage() Usage { return s.ev.pivot.u }

// Close implements EventStream.
func (s *bedrockStream) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	return s.body.Close()
}

var _ EventStream = (*bedrockStream)(nil)
