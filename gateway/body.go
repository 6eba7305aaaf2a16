package gateway

import (
	"errors"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
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

// readBody reads the request body, at most server.max_body_bytes, within
// the read deadline, holding its buffer's bytes in the node's body budget
// through lease (the caller releases it when the request ends, on every
// exit). It answers 413 over the limit, 408 when the client is too slow
// and 503 when the node already holds server.max_inflight_body_bytes. The
// buffer doubles only once it is full of bytes that really arrived, so a
// client announcing 10 MiB and sending one byte costs 16 KiB. The read
// deadline is server.read_timeout, never past end, the request's deadline
// (zero: none): a body trickling in does not hold the handler past
// server.request_timeout (SPEC 14).
func (s *Server) readBody(c *gin.Context, lease *bodyLease, end time.Time) ([]byte, *apiError) {
	r := c.Request
	srv := s.cfg().Server
	limit := srv.MaxBodyBytes
	if ce := r.Header.Values("Content-Encoding"); len(ce) > 0 && !identityOnly(ce) {
		// a compressed body parsed as it came would be answered "not
		// valid JSON"; a content coding the server does not accept is 415,
		// with the codings it does accept (RFC 9110 8.4, 15.5.16; RFC 7694)
		c.Header("Accept-Encoding", "identity")
		return nil, &apiError{Status: http.StatusUnsupportedMediaType, Type: "invalid_request_error", Code: "unsupported_content_encoding",
			Message: "request bodies are read uncompressed: send the body without Content-Encoding"}
	}
	if r.ContentLength > limit {
		return nil, errTooLarge(limit)
	}
	now := time.Now()
	dl := writeDeadline(now, srv.ReadTimeout, end)
	byRequest := !end.IsZero() && dl.Equal(end) // the request's deadline binds
	if !dl.IsZero() {
		if d := connDeadlines(c.Writer); d != nil {
			_ = d.SetReadDeadline(dl)
		}
	}
	lease.budget, lease.size = &s.bodies, srv.MaxInflightBodyBytes // config.Load sets its default
	body, err := readBounded(r.Body, r.ContentLength, limit, lease)
	if err != nil {
		lease.release() // the buffer is garbage now; callers may release again
	}
	switch {
	case err == nil:
		return body, nil
	case errors.Is(err, errBodyTooLarge):
		return nil, errTooLarge(limit)
	case errors.Is(err, errBodyBudget):
		c.Header("Connection", "close") // the rest of the body is never read
		return nil, s.bodyBudgetExhausted(lease.size)
	case errors.Is(err, os.ErrDeadlineExceeded):
		c.Header("Connection", "close")
		within := "server.read_timeout (" + srv.ReadTimeout.String() + ")"
		if byRequest {
			within = "server.request_timeout (" + srv.RequestTimeout.String() + ")"
		}
		return nil, &apiError{Status: http.StatusRequestTimeout, Type: "invalid_request_error", Code: "request_timeout",
			Message: "the request body did not arrive within " + within + ": send it faster"}
	}
	return nil, errBadRequest("", "could not read the request body: "+err.Error())
}

// identityOnly reports whether the Content-Encoding values name no coding
// but identity.
func identityOnly(values []string) bool {
	for _, v := range values {
		for _, coding := range strings.Split(v, ",") {
			if c := strings.TrimSpace(coding); c != "" && !strings.EqualFold(c, "identity") {
				return false
			}
		}
	}
	return true
}

// bodyBudgetExhausted counts and logs a request refused for the node's
// body budget (size bytes) and is its 503.
func (s *Server) bodyBudgetExhausted(size int64) *apiError {
	s.Metrics.BodyBudgetRejected.Inc()
	s.warnBodyBudget(size)
	return &apiError{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "body_budget_exhausted",
		RetryAfter: time.Second,
		Message: "this node is reading too many request bodies at once (server.max_inflight_body_bytes, " +
			strconv.FormatInt(size, 10) + " bytes): retry shortly"}
}

// bodyLogEvery spaces the body-budget warnings: a flood of rejections is
// one log line per interval (the metric counts each).
const bodyLogEvery = 10 * time.Second

// warnBodyBudget logs that the body budget is exhausted, at most once per
// bodyLogEvery.
func (s *Server) warnBodyBudget(size int64) {
	now, last := time.Now().UnixNano(), s.bodyLogAt.Load()
	if now-last < int64(bodyLogEvery) || !s.bodyLogAt.CompareAndSwap(last, now) {
		return
	}
	s.Logger.Warn("request bodies over server.max_inflight_body_bytes: answering 503 until some end (raise it, or add memory or replicas, if this persists; switchyard_body_budget_rejected_total counts them)",
		"max_inflight_body_bytes", size, "held", s.bodies.held.Load())
}

var (
	errBodyTooLarge = errors.New("request body over the limit")
	errBodyBudget   = errors.New("node body budget exhausted")
)

// shapeLimits are the parse limits of the live configuration (SPEC 14).
func (s *Server) shapeLimits() wire.Limits {
	srv := s.cfg().Server
	return wire.Limits{MaxMessages: srv.MaxMessages, MaxInputItems: srv.MaxInputItems}
}

// readBounded reads r to its end into a buffer that grows with the bytes
// read: it starts at bodyChunk (or the announced length when smaller) and
// doubles only when full, never past the announced length (plus one byte
// to see the end) or limit+1. More than limit bytes is errBodyTooLarge.
// Each buffer's growth is taken from lease first; a growth the budget
// cannot hold is errBodyBudget. announced is -1 (unknown) or at most limit
// (readBody answers 413 before reading a larger announcement).
func readBounded(r io.Reader, announced, limit int64, lease *bodyLease) ([]byte, error) {
	first := min(int64(bodyChunk), limit+1)
	if announced >= 0 {
		first = min(first, announced+1)
	}
	if !lease.grow(first) {
		return nil, errBodyBudget
	}
	buf := make([]byte, 0, first)
	for {
		if len(buf) == cap(buf) {
			next := max(2*int64(cap(buf)), bodyChunk)
			if n := int64(len(buf)); announced >= 0 && n <= announced {
				next = min(next, announced+1)
			}
			next = min(next, limit+1)
			if !lease.grow(next - int64(cap(buf))) {
				return nil, errBodyBudget
			}
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

// bodyBudget is the node's budget of request-body bytes held at once
// (server.max_inflight_body_bytes, SPEC 14): without it, N authenticated
// uploads hold N body limits, whatever the per-request bound. It counts
// the body buffers' capacity, which grows only with bytes that arrived.
// Lock-free: reserving is one compare-and-swap, releasing one add.
type bodyBudget struct {
	held atomic.Int64 // bytes reserved by the bodies being read or served
}

// take reserves n bytes when the budget then holds at most limit; it never
// lets held pass limit, even for a moment, so the gauge is exact.
func (b *bodyBudget) take(n, limit int64) bool {
	for {
		cur := b.held.Load()
		if cur+n > limit {
			return false
		}
		if b.held.CompareAndSwap(cur, cur+n) {
			return true
		}
	}
}

// smallBodyShare: the growth of a body past its first buffer may use the
// budget only up to size - size/smallBodyShare. The rest is for first
// buffers (at most bodyChunk each), so ordinary small requests keep being
// served while large uploads hold the budget.
const smallBodyShare = 8

// bodyLease is one request's share of the body budget. The zero value
// holds nothing; release is idempotent. Not safe for concurrent use (one
// request's goroutine owns it).
type bodyLease struct {
	budget *bodyBudget
	size   int64 // the budget's size when the request started (server.max_inflight_body_bytes)
	held   int64 // bytes this request holds
}

// grow takes n more bytes for this request's buffer: the first buffer
// against the whole budget, later growth against all but the small-body
// share.
func (l *bodyLease) grow(n int64) bool {
	limit := l.size
	if l.held > 0 {
		limit -= l.size / smallBodyShare
	}
	if !l.budget.take(n, limit) {
		return false
	}
	l.held += n
	return true
}

// release gives this request's bytes back; every exit of a request that
// read a body calls it (deferred by the handler).
func (l *bodyLease) release() {
	if l.held != 0 {
		l.budget.held.Add(-l.held)
		l.held = 0
	}
}

// deadlines is the middleware that gives every response write_timeout from
// the start of the request, capped at request_timeout; handlers that write
// later or longer (the pipeline, streams) renew it before each write.
func (s *Server) deadlines(c *gin.Context) {
	s.renewWriteDeadline(c.Writer, time.Now().Add(s.cfg().Server.RequestTimeout))
	c.Next()
}

// renewWriteDeadline gives the next write server.write_timeout to make
// progress, but never past end, the request's deadline (zero: none): a
// client that stops reading is cut off then, and the write fails at once
// instead of holding the handler, its slot and its upstream call (SPEC 14).
func (s *Server) renewWriteDeadline(w http.ResponseWriter, end time.Time) {
	if d := connDeadlines(w); d != nil {
		if t := writeDeadline(time.Now(), s.cfg().Server.WriteTimeout, end); !t.IsZero() {
			_ = d.SetWriteDeadline(t)
		}
	}
}

// writeDeadline is the deadline of a write starting at now: timeout later,
// capped at end. Zero timeout or end means that bound is off; both off
// gives the zero time (no deadline).
func writeDeadline(now time.Time, timeout time.Duration, end time.Time) time.Time {
	var t time.Time
	if timeout > 0 {
		t = now.Add(timeout)
	}
	if !end.IsZero() && (t.IsZero() || end.Before(t)) {
		t = end
	}
	return t
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
// per chunk, none past end (the request's deadline). It returns the first
// write error.
func (s *Server) writeBody(c *gin.Context, status int, body []byte, end time.Time) error {
	w := c.Writer
	w.Header()["Content-Type"] = jsonContentType
	w.WriteHeader(status)
	w.WriteHeaderNow()
	for len(body) > 0 {
		s.renewWriteDeadline(w, end)
		n := min(len(body), writeChunk)
		if _, err := w.Write(body[:n]); err != nil {
			return err
		}
		body = body[n:]
	}
	return nil
}

// eventWriter writes stream events, each under a renewed write deadline
// that never passes the request's.
type eventWriter struct {
	w       http.ResponseWriter
	timeout time.Duration
	end     time.Time    // the request's deadline; zero: none
	dl      deadliner    // nil when the writer has none
	flush   func() error // reports a failed write
}

func (s *Server) newEventWriter(w http.ResponseWriter, end time.Time) eventWriter {
	return eventWriter{w: w, timeout: s.cfg().Server.WriteTimeout, end: end, dl: connDeadlines(w), flush: flushError(w)}
}

// write writes and flushes one event under a renewed write deadline; the
// error of either ends the stream.
func (ew eventWriter) write(ev []byte) error {
	if ew.dl != nil {
		if t := writeDeadline(time.Now(), ew.timeout, ew.end); !t.IsZero() {
			_ = ew.dl.SetWriteDeadline(t)
		}
	}
	if _, err := ew.w.Write(ev); err != nil {
		return err
	}
	return ew.flush()
}
