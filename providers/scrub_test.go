package providers

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"switchyard/catalog"
	"switchyard/config"
	"switchyard/routing"
	"switchyard/wire"
)

func testScrubber() *Scrubber {
	return NewScrubber(&catalog.Provider{Provider: config.Provider{
		Name: "p", Kind: KindOpenAI, APIKey: "sk-live-abcdef123456",
		BaseURL: "https://user:urlpass99@llm.internal.example:8443/v1?sig=querysecret",
		Headers: map[string]string{"api-key": "azure-key-777", "api-version": "2024-02-01", "X-Auth": "Bearer tok-tok-tok"},
	}})
}

func TestScrubberString(t *testing.T) {
	sc := testScrubber()
	for _, in := range []string{
		"Incorrect API key provided: sk-live-abcdef123456.",
		"dial tcp 10.0.0.5:443: connect: connection refused",
		"dial tcp [fd00::5]:443: i/o timeout",
		"lookup llm.internal.example: no such host",
		"Post \"https://llm.internal.example:8443/v1/chat\": EOF",
		"bad header api-key azure-key-777 and tok-tok-tok from 2001:db8::7",
		"proxy at backend-7.svc.cluster.local:8080 refused; sig=querysecret; pass urlpass99",
	} {
		out := sc.String(in)
		for _, leak := range []string{"sk-live", "10.0.0.5", "fd00::5", "llm.internal", "azure-key", "tok-tok", "2001:db8", "backend-7", "querysecret", "urlpass99"} {
			if strings.Contains(out, leak) {
				t.Errorf("String(%q) = %q keeps %q", in, out, leak)
			}
		}
	}
	if got := sc.String("upstream said: model busy, retry in 2s"); got != "upstream said: model busy, retry in 2s" {
		t.Errorf("plain text changed: %q", got)
	}
	if got := sc.String("api-version 2024-02-01"); got != "api-version 2024-02-01" {
		t.Errorf("a non-credential header value was scrubbed: %q", got)
	}
	body := []byte(`{"content":"key sk-live-abcdef123456 here"}`)
	if got := sc.Body(body); bytes.Contains(got, []byte("sk-live")) || !bytes.Contains(got, []byte("[redacted]")) {
		t.Errorf("Body = %s", got)
	}
	clean := []byte(`{"content":"nothing"}`)
	if got := sc.Body(clean); &got[0] != &clean[0] {
		t.Error("Body copied a body that holds no secret")
	}
	e := sc.Error(&Error{Status: 401, Class: routing.ClassAuth, Message: "bad key sk-live-abcdef123456", Code: "sk-live-abcdef123456", cause: context.Canceled})
	var pe *Error
	if !errors.As(e, &pe) || strings.Contains(pe.Message+pe.Code, "sk-live") || !errors.Is(e, context.Canceled) {
		t.Errorf("Error = %#v", e)
	}
}

// FuzzScrubber: a credential or an upstream address placed anywhere in any
// text never survives String, and String never panics.
func FuzzScrubber(f *testing.F) {
	for _, s := range []string{"", "error: ", "dial tcp ", "key=", "\xff\xfe", "[::1]:", "a.b:1"} {
		f.Add(s, s, uint8(0))
	}
	sc := testScrubber()
	leaks := []string{"sk-live-abcdef123456", "azure-key-777", "tok-tok-tok", "llm.internal.example", "10.1.2.3:8080", "[fd00::1]:443", "querysecret"}
	f.Fuzz(func(t *testing.T, before, after string, which uint8) {
		leak := leaks[int(which)%len(leaks)]
		out := sc.String(before + leak + after)
		if strings.Contains(out, leak) {
			t.Fatalf("String(%q) = %q keeps %q", before+leak+after, out, leak)
		}
		b := sc.Body([]byte(before + leaks[0] + after))
		if bytes.Contains(b, []byte(leaks[0])) {
			t.Fatalf("Body keeps the key: %q", b)
		}
	})
}

func sseStream(t *testing.T, body io.Reader) (*Response, error) {
	t.Helper()
	resp := &http.Response{StatusCode: 200, Body: io.NopCloser(body)}
	return startStream(context.Background(), resp, &openAIRelay{}, time.Now(), nil)
}

// An event of data: lines without the blank line that ends it used to grow
// without limit; it is capped as a whole, as a server_error.
func TestSSEEventCapped(t *testing.T) {
	line := "data: " + strings.Repeat("y", 64<<10) + "\n"
	endless := io.MultiReader(strings.NewReader(strings.Repeat(line, 200))) // 12.5 MiB, one event
	_, err := sseStream(t, endless)
	var pe *Error
	if !errors.As(err, &pe) || pe.Class != routing.ClassServerError || !strings.Contains(pe.Message, "8 MiB") {
		t.Fatalf("endless event: %v, want a server_error naming the cap", err)
	}
	longLine := "data: " + strings.Repeat("z", 9<<20)
	if _, err := sseStream(t, strings.NewReader(longLine)); !errors.As(err, &pe) || pe.Class != routing.ClassServerError {
		t.Fatalf("9 MiB line: %v, want a server_error", err)
	}
	ok := "data: " + strings.Repeat("k", 4<<20) + "\ndata: x\n\ndata: [DONE]\n\n"
	r, err := sseStream(t, strings.NewReader(ok))
	if err != nil {
		t.Fatalf("a 4 MiB event is fine: %v", err)
	}
	_ = r.Stream.Close()
}

// A sync body over the cap ends the attempt as a server_error (the gateway
// then fails over), and a lying Content-Length allocates nothing up front.
func TestSyncBodyCapped(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		chunk := bytes.Repeat([]byte("a"), 1<<20)
		for i := 0; i <= maxResponseBody>>20 && r.Context().Err() == nil; i++ {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	a, err := New(&catalog.Provider{Provider: config.Provider{Name: "big", Kind: KindOpenAI, BaseURL: srv.URL}})
	if err != nil {
		t.Fatal(err)
	}
	creq, err := wire.Parse([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`), catalog.OpChat, wire.FormatOpenAI)
	if err != nil {
		t.Fatal(err)
	}
	d := &catalog.Deployment{Deployment: config.Deployment{ID: "d", Model: "m"}}
	_, err = a.Do(context.Background(), d, &Request{Op: catalog.OpChat, Client: creq})
	var pe *Error
	if !errors.As(err, &pe) || pe.Class != routing.ClassServerError || pe.Status != 0 || !strings.Contains(pe.Message, "64 MiB") {
		t.Fatalf("65 MiB body: %v, want a server_error naming the cap", err)
	}

	liar := &http.Response{StatusCode: 200, ContentLength: 60 << 20, Body: io.NopCloser(strings.NewReader(`{}`))}
	var raw []byte
	n := testing.AllocsPerRun(1, func() { raw, _ = readBody(context.Background(), liar) })
	if cap(raw) > 1<<20 || n > 10 {
		t.Fatalf("a 60 MiB Content-Length with a 2-byte body: cap %d, %v allocs", cap(raw), n)
	}
}

func TestUsageClamped(t *testing.T) {
	cases := []struct {
		in, want Usage
		changed  bool
	}{
		{Usage{10, 20, 3, 2, 0}, Usage{10, 20, 3, 2, 0}, false},
		{Usage{-5, 20, 0, 0, 0}, Usage{0, 20, 0, 0, 0}, true},
		{Usage{900_000_000_000_000_000, 1, 0, 0, 0}, Usage{MaxUsageTokens, 1, 0, 0, 0}, true},
		{Usage{1, -1, 0, 0, 0}, Usage{1, 0, 0, 0, 0}, true},
		{Usage{10, 1, -3, 0, 0}, Usage{10, 1, 0, 0, 0}, true},
		{Usage{10, 1, 0, 900_000_000_000, 0}, Usage{10, 1, 0, MaxUsageTokens, 0}, true},
		// reasoning tokens are a part of the output, never more than it
		{Usage{10, 20, 0, 0, 15}, Usage{10, 20, 0, 0, 15}, false},
		{Usage{10, 20, 0, 0, 25}, Usage{10, 20, 0, 0, 20}, true},
		{Usage{10, 20, 0, 0, -1}, Usage{10, 20, 0, 0, 0}, true},
		{Usage{10, 900_000_000_000, 0, 0, 900_000_000_000}, Usage{10, MaxUsageTokens, 0, 0, MaxUsageTokens}, true},
	}
	for _, c := range cases {
		if got, ch := c.in.Clamped(); got != c.want || ch != c.changed {
			t.Errorf("%+v.Clamped() = %+v, %v; want %+v, %v", c.in, got, ch, c.want, c.changed)
		}
	}
}

// sliceStream returns fixed events, the last one ending the stream.
type sliceStream struct {
	evs  [][]byte
	i    int
	last bool
}

func (s *sliceStream) Next() ([]byte, error) {
	if s.i == len(s.evs) {
		return nil, io.EOF
	}
	s.i++
	s.last = s.i == len(s.evs)
	return s.evs[s.i-1], nil
}
func (s *sliceStream) Ended() bool  { return s.last }
func (s *sliceStream) Usage() Usage { return Usage{} }
func (s *sliceStream) Close() error { return nil }

// Issue 30: the provider's credential split across two stream events
// passed the per-event scrub. Now the event ending with its head waits for
// the next, and both parts are masked; other events pass unchanged and
// unheld, and Ended follows the events returned.
func TestScrubbedStreamSplitSecret(t *testing.T) {
	sc := testScrubber() // api_key sk-live-abcdef123456
	chunk := func(s string) []byte {
		return []byte(`data: {"choices":[{"index":0,"delta":{"content":"` + s + `"}}]}` + "\n\n")
	}
	in := &sliceStream{evs: [][]byte{chunk("hello "), chunk("key sk-live-abc"), chunk("def123456 end"), chunk("sk-li"), []byte("data: [DONE]\n\n")}}
	st := &scrubbedStream{EventStream: in, sc: sc}
	var all []byte
	var ended []bool
	for {
		ev, err := st.Next()
		if err != nil {
			break
		}
		all = append(all, ev...)
		ended = append(ended, st.Ended())
	}
	if bytes.Contains(all, []byte("abcdef123456")) || bytes.Contains(all, []byte("def123456")) || bytes.Contains(all, []byte("sk-live-abc\"")) {
		t.Fatalf("split secret relayed: %s", all)
	}
	if !bytes.Contains(all, []byte(redactedSecret)) || !bytes.Contains(all, []byte(" end")) || !bytes.Contains(all, []byte(`"sk-li"`)) {
		t.Fatalf("too much masked: %s", all)
	}
	if len(ended) != 5 || ended[3] || !ended[4] {
		t.Fatalf("Ended per event %v, want only the last", ended)
	}
}

// TestErrorTextCutNeverShowsAKeyPrefix: an upstream error body that is not
// an error object is relayed as its first 512 bytes; a key that straddles
// the cut is dropped whole, not cut short. A key cut short has neither its
// credential shape nor the configured secret's whole value, so the
// scrubber let its first characters through (up to the cut: 14 of the
// configured key's here), past the six SPEC 15 allows.
func TestErrorTextCutNeverShowsAKeyPrefix(t *testing.T) {
	const secret = "sk-upstream-SECRET1234567890"
	sc := NewScrubber(&catalog.Provider{Provider: config.Provider{Name: "p", Kind: "openai", APIKey: secret}})
	for _, at := range []int{480, 490, 500, 505, 510, 511} { // where the key starts
		body := strings.Repeat("x ", at/2) + strings.Repeat("y", at%2) + secret + " trailing text after the key, long enough to pass the cut"
		msg := sc.String(parseErrorBody([]byte(body)).Message)
		for n := 7; n <= len(secret); n++ {
			if strings.Contains(msg, secret[:n]) {
				t.Fatalf("key at %d: the message shows %d characters of the key: %q", at, n, msg[max(0, len(msg)-40):])
			}
		}
		if len(msg) > errorTextMax+3 {
			t.Fatalf("key at %d: message of %d bytes", at, len(msg))
		}
	}
	// a short body is whole, its key masked as before
	if msg := sc.String(parseErrorBody([]byte("bad key " + secret)).Message); strings.Contains(msg, secret[:7]) {
		t.Fatalf("short body: %q", msg)
	}
}

// TestReadBodyOneAllocation: a body whose Content-Length gives its size is
// read into one buffer of that size (bytes.Buffer.ReadFrom grew a 300-byte
// answer's buffer to 1.1 KB), and a body past its Content-Length still
// arrives whole.
func TestReadBodyOneAllocation(t *testing.T) {
	body := strings.Repeat("x", 310)
	var raw []byte
	n := testing.AllocsPerRun(20, func() {
		resp := &http.Response{StatusCode: 200, ContentLength: int64(len(body)), Body: io.NopCloser(strings.NewReader(body))}
		raw, _ = readBody(context.Background(), resp)
	})
	if string(raw) != body || cap(raw) > len(body)+1 {
		t.Fatalf("read %d bytes into cap %d, want the %d bytes in cap <= %d", len(raw), cap(raw), len(body), len(body)+1)
	}
	if n > 3 { // the buffer; the response and reader the closure makes
		t.Errorf("%v allocations, want <= 3", n)
	}
	for _, cl := range []int64{-1, 0, 5, 200} {
		big := strings.Repeat("y", 100_000)
		resp := &http.Response{StatusCode: 200, ContentLength: cl, Body: io.NopCloser(iotest.OneByteReader(strings.NewReader(big)))}
		got, err := readBody(context.Background(), resp)
		if err != nil || string(got) != big {
			t.Fatalf("Content-Length %d, 100,000 bytes one at a time: %d bytes, %v", cl, len(got), err)
		}
	}
}
