package providers

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strings"

	"switchyard/catalog"
	"switchyard/config"
	"switchyard/redact"
)

// Scrubber removes what an upstream must never leak through the gateway
// (SPEC 15): the provider's credential (its api_key, credential headers and
// base-URL secrets) and upstream addresses (the base URL's host, any IP
// address or host:port). It is the one scrubber: every HTTP adapter is
// wrapped in it (New), so every upstream error message (relayed to the
// client, recorded in the audit timeline, written to the log), every
// relayed header and every relayed body has passed it.
//
// Error text gets the full treatment; bodies and headers, which are
// relayed on every request, are only searched for the credential itself
// (a substring search per secret), never rewritten otherwise.
type Scrubber struct {
	// immutable after NewScrubber
	secrets []string // longest first, so a secret containing another goes first
	hosts   []string // base URL host:port and host name, longest first
}

// The replacements in scrubbed text.
const (
	redactedSecret  = "[redacted]"
	redactedAddress = "[upstream]"
)

// minBodySecret is the shortest secret searched for in relayed bodies: a
// shorter one would rewrite ordinary text (error text is scrubbed of any).
const minBodySecret = 8

// addressPattern matches what names a network endpoint in error text: an
// IPv4 address with an optional port, a bracketed IPv6 address with an
// optional port, an unbracketed IPv6 address, and a dotted host name with a
// port (backend-7.internal:8443). No word boundaries: an address glued to
// other text ("A10.0.0.5:4430") is still an address (found by the fuzz
// test), and a version string that looks like one is a price worth paying.
var addressPattern = regexp.MustCompile(
	`(?:\d{1,3}\.){3}\d{1,3}(?::\d+)?` +
		`|\[[0-9A-Za-z.%]*:[0-9A-Za-z:.%]*\](?::\d+)?` +
		`|(?:[0-9A-Fa-f]{1,4}:){7}[0-9A-Fa-f]{1,4}` +
		`|(?:[0-9A-Fa-f]{1,4}:){1,6}:(?:[0-9A-Fa-f]{1,4}(?::[0-9A-Fa-f]{1,4}){0,5})?` +
		`|(?:[A-Za-z0-9-]+\.)+[A-Za-z][A-Za-z0-9-]*:\d+`)

// credentialHeader reports a provider header whose value is a secret.
func credentialHeader(name string) bool {
	n := strings.ToLower(name)
	for _, w := range []string{"auth", "key", "token", "secret", "cookie", "signature", "password"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// NewScrubber builds the scrubber of one provider.
func NewScrubber(p *catalog.Provider) *Scrubber {
	s := &Scrubber{}
	addSecret := func(v string) {
		v = strings.TrimSpace(v)
		if len(v) >= 4 {
			s.secrets = append(s.secrets, v)
		}
	}
	addSecret(p.APIKey)
	addSecret(p.AWSSecretAccessKey) // bedrock (SPEC 10, 15)
	addSecret(p.AWSSessionToken)
	addSecret(p.AWSAccessKeyID)
	for k, v := range p.Headers {
		if credentialHeader(k) {
			addSecret(v)
			if _, tok, ok := strings.Cut(v, " "); ok { // "Bearer <token>"
				addSecret(tok)
			}
		}
	}
	for _, v := range config.URLSecrets(p.BaseURL) {
		addSecret(v)
	}
	if u, err := url.Parse(p.BaseURL); err == nil && u.Host != "" {
		s.hosts = append(s.hosts, u.Host)
		if h := u.Hostname(); h != u.Host {
			s.hosts = append(s.hosts, h)
		}
	}
	longestFirst := func(v []string) {
		sort.Slice(v, func(i, j int) bool { return len(v[i]) > len(v[j]) })
	}
	longestFirst(s.secrets)
	longestFirst(s.hosts)
	return s
}

// String scrubs error text: the provider's credentials, then its hosts,
// then any address, then anything shaped like a credential (SPEC 15).
func (s *Scrubber) String(msg string) string {
	if msg == "" {
		return msg
	}
	for _, sec := range s.secrets {
		msg = strings.ReplaceAll(msg, sec, redactedSecret)
	}
	for _, h := range s.hosts {
		msg = strings.ReplaceAll(msg, h, redactedAddress)
	}
	return redact.Credentials(addressPattern.ReplaceAllString(msg, redactedAddress))
}

// Body returns b without the credential; b itself when it holds none (no
// copy on the hot path).
func (s *Scrubber) Body(b []byte) []byte {
	for _, sec := range s.secrets {
		if len(sec) >= minBodySecret && bytes.Contains(b, []byte(sec)) {
			b = bytes.ReplaceAll(b, []byte(sec), []byte(redactedSecret))
		}
	}
	return b
}

// Header scrubs relayed header values of the credential, in place.
func (s *Scrubber) Header(h http.Header) http.Header {
	for _, vs := range h {
		for i, v := range vs {
			vs[i] = string(s.Body([]byte(v)))
		}
	}
	return h
}

// Error returns err with every text field scrubbed (a copy: the original
// may be shared). Any error becomes an *Error.
func (s *Scrubber) Error(err error) error {
	if err == nil {
		return nil
	}
	e := AsError(err)
	c := *e
	c.Message, c.Type, c.Code = s.String(e.Message), s.String(e.Type), s.String(e.Code)
	if c.body != nil {
		c.body = []byte(s.String(string(e.body)))
	}
	return &c
}

// scrubbed is an HTTP adapter behind the provider's Scrubber.
type scrubbed struct {
	Adapter
	sc *Scrubber
}

// Do implements Adapter.
func (a scrubbed) Do(ctx context.Context, d *catalog.Deployment, req *Request) (*Response, error) {
	resp, err := a.Adapter.Do(ctx, d, req)
	if err != nil {
		return nil, a.sc.Error(err)
	}
	resp.Body = a.sc.Body(resp.Body)
	resp.Header = a.sc.Header(resp.Header)
	if resp.Stream != nil {
		resp.Stream = &scrubbedStream{EventStream: resp.Stream, sc: a.sc}
	}
	return resp, nil
}

// minSplit is the shortest head of a secret that makes an event wait for
// the next one: shorter heads ("sk") are ordinary text.
const minSplit = 4

// scrubbedStream scrubs every relayed event and stream error, also of a
// credential split across two events: an event whose JSON string ends with
// the head of a secret is held until the next one arrives (the only events
// that wait, and by one event), and when the next one's string starts with
// the rest, the head and the rest are both masked.
type scrubbedStream struct {
	EventStream
	sc *Scrubber

	next      []byte // an event read ahead, returned by the next Next
	nextErr   error  // or the error read ahead
	nextEnded bool   // whether the stream had ended after next
	ahead     bool   // next/nextErr hold a read-ahead
	ended     bool   // Ended of the events Next last returned
}

// Next implements EventStream.
func (st *scrubbedStream) Next() ([]byte, error) {
	var ev []byte
	var err error
	if st.ahead {
		st.ahead = false
		ev, err, st.ended = st.next, st.nextErr, st.nextEnded
		st.next, st.nextErr = nil, nil
	} else {
		ev, err = st.EventStream.Next()
		st.ended = st.EventStream.Ended()
	}
	if err != nil {
		if errors.Is(err, io.EOF) {
			return ev, err
		}
		return nil, st.sc.Error(err)
	}
	ev = st.sc.Body(ev)
	if st.ended {
		return ev, nil
	}
	sec, k := st.sc.splitHead(ev)
	if sec == "" {
		return ev, nil
	}
	// hold ev: read the next event and mask the secret across the two
	nx, nerr := st.EventStream.Next()
	st.ahead, st.nextErr, st.nextEnded = true, nerr, st.EventStream.Ended()
	if nerr == nil {
		nx = st.sc.Body(nx)
		if rest := []byte(`"` + sec[k:]); bytes.Contains(nx, rest) {
			head := []byte(sec[:k] + `"`)
			i := bytes.LastIndex(ev, head)
			ev = append(append(append([]byte{}, ev[:i]...), redactedSecret+`"`...), ev[i+len(head):]...)
			nx = bytes.Replace(nx, rest, []byte(`"`), 1)
		}
	}
	st.next = nx
	return ev, nil
}

// Ended implements EventStream: of the events Next last returned.
func (st *scrubbedStream) Ended() bool { return st.ended }

// splitHead finds a secret whose first k characters (k >= minSplit, short
// of the whole) end a JSON string in ev: the head of a credential the next
// event may finish. "" when there is none.
func (s *Scrubber) splitHead(ev []byte) (sec string, k int) {
	for _, sc := range s.secrets {
		if len(sc) < minBodySecret || !bytes.Contains(ev, []byte(sc[:minSplit])) {
			continue // the common case: one search, no allocation
		}
		for k := len(sc) - 1; k >= minSplit; k-- {
			if bytes.Contains(ev, []byte(sc[:k]+`"`)) {
				return sc, k
			}
		}
	}
	return "", 0
}

var (
	_ Adapter     = scrubbed{}
	_ EventStream = (*scrubbedStream)(nil)
)
