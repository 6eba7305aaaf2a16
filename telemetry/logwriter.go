package telemetry

import (
	"io"
	"sync"
	"time"
)

// Log writer defaults: a request's log line is about 350 bytes, so at
// saturation (a few thousand requests a second) a batch is a few dozen
// lines and the process makes tens of writes a second instead of one per
// request.
const (
	DefaultLogBuffer = 32 << 10
	DefaultLogDelay  = 50 * time.Millisecond
)

// LogWriter batches the structured log's lines on their way to out (the
// process's stderr): one write per batch instead of one system call per
// line. A line is written at the latest delay after it was logged, at once
// when the batch passes size bytes, and on Flush and Close. Lines keep
// their order. Memory is bounded by size plus the lines being appended at
// that moment; a logger never waits for a background goroutine, only,
// when the batch is full, for the write of that batch to out (what every
// line cost before). What a SIGKILL or a crash interrupts is at most delay
// of lines; a graceful stop flushes (Close).
type LogWriter struct {
	out   io.Writer
	size  int
	delay time.Duration
	after func(time.Duration, func()) // time.AfterFunc; replaced by tests

	mu     sync.Mutex // guards buf, armed, closed
	buf    []byte
	armed  bool // a timed flush is scheduled
	closed bool // Close ran: lines go straight to out

	wmu   sync.Mutex // orders the writes to out; guards spare
	spare []byte
}

// NewLogWriter batches writes to out, size bytes at most per batch, each
// line out within delay.
func NewLogWriter(out io.Writer, size int, delay time.Duration) *LogWriter {
	return &LogWriter{out: out, size: max(size, 1), delay: delay,
		after: func(d time.Duration, f func()) { time.AfterFunc(d, f) }}
}

// Write appends p (one log line: slog's handlers write each record with
// one call) to the batch.
func (w *LogWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		w.wmu.Lock()
		defer w.wmu.Unlock()
		return w.out.Write(p)
	}
	w.buf = append(w.buf, p...)
	full := len(w.buf) >= w.size
	arm := !full && !w.armed
	if arm {
		w.armed = true
	}
	w.mu.Unlock()
	if full {
		return len(p), w.Flush()
	}
	if arm {
		w.after(w.delay, w.timed)
	}
	return len(p), nil
}

// timed is the scheduled flush.
func (w *LogWriter) timed() {
	w.mu.Lock()
	w.armed = false
	w.mu.Unlock()
	_ = w.Flush()
}

// Flush writes out what is batched.
func (w *LogWriter) Flush() error {
	w.wmu.Lock()
	defer w.wmu.Unlock()
	w.mu.Lock()
	b := w.buf
	w.buf = w.spare[:0]
	w.mu.Unlock()
	if len(b) == 0 {
		w.spare = b
		return nil
	}
	_, err := w.out.Write(b)
	if cap(b) > 4*w.size {
		b = nil // one huge line: do not keep its buffer
	}
	w.spare = b[:0]
	return err
}

// Close flushes; later lines are written straight through.
func (w *LogWriter) Close() error {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	return w.Flush()
}
