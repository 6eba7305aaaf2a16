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

// String scrubs error text: credentials, then the provider's hosts, then
// any address.
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
	return addressPattern.ReplaceAllString(msg, redactedAddress)
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
		resp.Stream = scrubbedStream{resp.Stream, a.sc}
	}
	return resp, nil
}

// scrubbedStream scrubs every relayed event and stream error.
type scrubbedStream struct {
	EventStream
	sc *Scrubber
}

// Next implements EventStream.
func (st scrubbedStream) Next() ([]byte, error) {
	ev, err := st.EventStream.Next()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return ev, err
		}
		return nil, st.sc.Error(err)
	}
	return st.sc.Body(ev), nil
}

var (
	_ Adapter     = scrubbed{}
	_ EventStream = scrubbedStream{}
)
