package gateway

import (
	"errors"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/gin-gonic/gin"

	"switchyard/wire"
)

// How the edge bounds what a hostile client can make it hold (SPEC 14):
// the body is read only after authentication, into a buffer that grows with
// the bytes that arrive, under server.read_timeout; every response write
// gets server.write_timeout to make progress.

// bodyChunk is the first read buffer and the unit a body buffer grows by
// at least; a Content-Length never sizes it before the bytes arrive.
const bodyChunk = 16 << 10

// readBody reads the request body, at most limit bytes, within the read
// deadline. It answers 413 over the limit and 408 when the client is too
// slow. The buffer doubles only once it is full of bytes that really
// arrived, so a client announcing 10 MiB and sending one byte costs 16 KiB.
func (s *Server) readBody(c *gin.Context) ([]byte, *apiError) {
	r := c.Request
	srv := s.cfg().Server
	limit := srv.MaxBodyBytes
	if r.ContentLength > limit {
		return nil, errTooLarge(limit)
	}
	if t := srv.ReadTimeout; t > 0 {
		if d := connDeadlines(c.Writer); d != nil {
			_ = d.SetReadDeadline(time.Now().Add(t))
		}
	}
	body, err := readBounded(r.Body, r.ContentLength, limit)
	switch {
	case err == nil:
		return body, nil
	case errors.Is(err, errBodyTooLarge):
		return nil, errTooLarge(limit)
	case errors.Is(err, os.ErrDeadlineExceeded):
		c.Header("Connection", "close")
		return nil, &apiError{Status: http.StatusRequestTimeout, Type: "invalid_request_error", Code: "request_timeout",
			Message: "the request body did not arrive within server.read_timeout (" + srv.ReadTimeout.String() + "): send it faster"}
	}
	return nil, errBadRequest("", "could not read the request body: "+err.Error())
}

var errBodyTooLarge = errors.New("request body over the limit")

// shapeLimits are the parse limits of the live configuration (SPEC 14).
func (s *Server) shapeLimits() wire.Limits {
	srv := s.cfg().Server
	return wire.Limits{MaxMessages: srv.MaxMessages, MaxInputItems: srv.MaxInputItems}
}

// readBounded reads r to its end into a buffer that grows with the bytes
// read: it starts at bodyChunk (or the announced length when smaller) and
// doubles only when full, never past the announced length (plus one byte
// to see the end) or limit+1. More than limit bytes is errBodyTooLarge.
func readBounded(r io.Reader, announced, limit int64) ([]byte, error) {
	first := min(int64(bodyChunk), limit+1)
	if announced >= 0 {
		first = min(first, announced+1)
	}
	buf := make([]byte, 0, first)
	for {
		if len(buf) == cap(buf) {
			next := max(2*int64(cap(buf)), bodyChunk)
			if n := int64(len(buf)); announced >= 0 && n <= announced {
				next = min(next, announced+1)
			}
			next = min(next, limit+1)
			nb := make([]byte, len(buf), next)
			copy(nb, buf)
			buf = nb
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > limit {
			return nil, errBodyTooLarge
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// deadlines is the middleware that gives every response write_timeout from
// the start of the request; handlers that write later or longer (the
// pipeline, streams) renew it before each write.
func (s *Server) deadlines(c *gin.Context) {
	s.renewWriteDeadline(c.Writer)
	c.Next()
}

// renewWriteDeadline gives the next write server.write_timeout to make
// progress: a client that stops reading is cut off then, and the write
// fails at once instead of holding the handler, its slot and its upstream
// call (SPEC 14).
func (s *Server) renewWriteDeadline(w http.ResponseWriter) {
	if t := s.cfg().Server.WriteTimeout; t > 0 {
		if d := connDeadlines(w); d != nil {
			_ = d.SetWriteDeadline(time.Now().Add(t))
		}
	}
}

// deadliner is the connection deadline control of net/http's response
// writer (what http.ResponseController uses).
type deadliner interface {
	SetReadDeadline(time.Time) error
	SetWriteDeadline(time.Time) error
}

// connDeadlines finds the deadline control behind w's wrappers (gin's
// writer), or nil when w has none (a test recorder). Unlike
// http.ResponseController it allocates nothing, also when unsupported: the
// hot path calls it on every response.
func connDeadlines(w http.ResponseWriter) deadliner {
	for {
		switch t := w.(type) {
		case deadliner:
			return t
		case interface{ Unwrap() http.ResponseWriter }:
			w = t.Unwrap()
		default:
			return nil
		}
	}
}

// flushError finds FlushError behind w's wrappers; flushing through it
// reports a write that failed (http.Flusher's Flush does not).
func flushError(w http.ResponseWriter) func() error {
	for {
		switch t := w.(type) {
		case interface{ FlushError() error }:
			return t.FlushError
		case interface{ Unwrap() http.ResponseWriter }:
			w = t.Unwrap()
		case http.Flusher:
			return func() error { t.Flush(); return nil }
		default:
			return func() error { return nil }
		}
	}
}

// writeChunk is how much of a sync body is written under one write
// deadline: a large body to a slow but reading client keeps progressing.
const writeChunk = 256 << 10

// jsonContentType is the Content-Type value of JSON responses, shared
// read-only by every response header map (never modified).
var jsonContentType = []string{"application/json"}

// writeBody writes a complete JSON response with a renewed write deadline
// per chunk. It returns the first write error.
func (s *Server) writeBody(c *gin.Context, status int, body []byte) error {
	w := c.Writer
	w.Header()["Content-Type"] = jsonContentType
	w.WriteHeader(status)
	w.WriteHeaderNow()
	for len(body) > 0 {
		s.renewWriteDeadline(w)
		n := min(len(body), writeChunk)
		if _, err := w.Write(body[:n]); err != nil {
			return err
		}
		body = body[n:]
	}
	return nil
}

// eventWriter writes stream events, each under a renewed write deadline.
type eventWriter struct {
	w       http.ResponseWriter
	timeout time.Duration
	dl      deadliner    // nil when the writer has none
	flush   func() error // reports a failed write
}

func (s *Server) newEventWriter(w http.ResponseWriter) eventWriter {
	return eventWriter{w: w, timeout: s.cfg().Server.WriteTimeout, dl: connDeadlines(w), flush: flushError(w)}
}

// write writes and flushes one event under a renewed write deadline; the
// error of either ends the stream.
func (ew eventWriter) write(ev []byte) error {
	if ew.dl != nil && ew.timeout > 0 {
		_ = ew.dl.SetWriteDeadline(time.Now().Add(ew.timeout))
	}
	if _, err := ew.w.Write(ev); err != nil {
		return err
	}
	return ew.flush()
}
