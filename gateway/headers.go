package gateway

import (
	"bytes"
	"net/http"
	"strconv"
	"time"
)

// headerBatch collects the response headers the pipeline stages decide on
// (request id, rate limits, tier, decision headers) and writes them in one
// go: all values share one string and one []string backing array, so a
// dozen headers cost two allocations instead of two dozen. Its arrays live
// inside the call value, which is pooled (callPool).
type headerBatch struct {
	n    int
	keys [24]string
	ends [24]int
	buf  []byte
	mem  [320]byte
}

func (h *headerBatch) push(key string) {
	if h.n == len(h.keys) {
		return // more headers than any path sets; never reached
	}
	h.keys[h.n], h.ends[h.n] = key, len(h.buf)
	h.n++
}

func (h *headerBatch) begin() {
	if h.buf == nil {
		h.buf = h.mem[:0]
	}
}

func (h *headerBatch) str(key, v string) {
	h.begin()
	h.buf = append(h.buf, v...)
	h.push(key)
}

func (h *headerBatch) int(key string, v int64) {
	h.begin()
	h.buf = strconv.AppendInt(h.buf, v, 10)
	h.push(key)
}

func (h *headerBatch) millis(key string, d time.Duration) {
	h.begin()
	h.buf = strconv.AppendFloat(h.buf, float64(d.Microseconds())/1000, 'f', 3, 64)
	h.push(key)
}

// usd renders an amount of USD as a plain decimal (SPEC 10.2: "0.0042"):
// never an exponent, at most 10 decimal places (a ten-thousandth of a
// micro-dollar, finer than any token's price), trailing zeros trimmed, so
// the exact cost of 0 tokens is "0".
func (h *headerBatch) usd(key string, v float64) {
	h.begin()
	start := len(h.buf)
	h.buf = strconv.AppendFloat(h.buf, v, 'f', 10, 64)
	if bytes.IndexByte(h.buf[start:], '.') >= 0 {
		h.buf = bytes.TrimRight(h.buf, "0")
		h.buf = bytes.TrimSuffix(h.buf, []byte{'.'})
	}
	h.push(key)
}

// reset renders a reset duration the way OpenAI does ("250ms", "6m0s").
func (h *headerBatch) reset(key string, d time.Duration) {
	h.begin()
	switch {
	case d <= 0:
		h.buf = append(h.buf, "0s"...)
	case d < time.Second:
		h.buf = strconv.AppendInt(h.buf, d.Milliseconds(), 10)
		h.buf = append(h.buf, "ms"...)
	default:
		h.buf = append(h.buf, d.Round(time.Millisecond).String()...)
	}
	h.push(key)
}

// contentLength adds the answer's Content-Length, n bytes, to the batch
// and marks the answer complete once flushed: finish sends it to the
// client before its bookkeeping.
func (cl *call) contentLength(n int) {
	cl.hdr.int("Content-Length", int64(n))
	cl.sized = true
}

// flush writes the collected headers into dst and empties the batch.
// Later values for the same key replace earlier ones.
func (h *headerBatch) flush(dst http.Header) {
	if h.n == 0 {
		return
	}
	s := string(h.buf)
	vals := make([]string, h.n)
	start := 0
	for i := 0; i < h.n; i++ {
		vals[i] = s[start:h.ends[i]]
		dst[h.keys[i]] = vals[i : i+1 : i+1]
		start = h.ends[i]
	}
	h.n, h.buf = 0, h.buf[:0]
}
