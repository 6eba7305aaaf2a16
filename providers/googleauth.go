package providers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"

	"switchyard/catalog"
	"switchyard/config"
	"switchyard/routing"
)

// googleScope is the OAuth2 scope Vertex AI accepts.
const googleScope = "https://www.googleapis.com/auth/cloud-platform"

// Token keeping (SPEC 10: vertex). Tunables, not configuration.
const (
	// tokenStartTimeout bounds the first fetch, made when the adapter is
	// built, before any request.
	tokenStartTimeout = 15 * time.Second
	// tokenFetchTimeout bounds one call to the token endpoint.
	tokenFetchTimeout = 10 * time.Second
	// tokenRefreshBefore is how long before expiry the background refresh
	// runs (for short-lived tokens: half their remaining life).
	tokenRefreshBefore = 5 * time.Minute
	// tokenRetryMax caps the backoff between failed refreshes.
	tokenRetryMax = 30 * time.Second
	// tokenRefreshMin is the shortest wait between two fetches, whatever
	// the token's life: an endpoint issuing tokens about to expire is not
	// asked again in a tight loop.
	tokenRefreshMin = time.Second
)

// tokenKeeper holds a Google OAuth2 access token for one provider. The
// token is fetched once when the keeper starts, bounded by a timeout, and
// refreshed by one background goroutine before it expires: a request only
// reads the current token, never waits for the token endpoint. The token
// source comes from golang.org/x/oauth2/google (service-account keys are
// signed there, never here), and the token endpoint is the key's token_uri,
// so tests point it at a fake.
type tokenKeeper struct {
	// immutable after start
	fetch  func() (*oauth2.Token, error) // one real call to the token endpoint
	now    func() time.Time
	after  func(time.Duration) <-chan time.Time
	stop   context.CancelFunc
	ctx    context.Context
	exited chan struct{} // closed when the refresh goroutine returns

	// written by the refresh goroutine, read by requests
	tok     atomic.Pointer[oauth2.Token]
	prev    atomic.Pointer[oauth2.Token] // the one before, still scrubbed
	lastErr atomic.Pointer[string]       // why the last fetch failed, for the auth error
}

// googleTokenFetcher returns the function that fetches a fresh token for
// provider p: from credentials_json, credentials_file, or Application
// Default Credentials; and the credentials JSON it read (nil for ADC), so
// its secrets can be scrubbed. Each call builds a new token source, so it
// always asks the endpoint (the library's sources cache until expiry, and
// the keeper wants a new token before that). hc bounds each call.
func googleTokenFetcher(p *catalog.Provider, hc *http.Client) (func() (*oauth2.Token, error), []byte, error) {
	ctx := context.WithValue(context.Background(), oauth2.HTTPClient, hc)
	var key []byte
	switch {
	case p.CredentialsJSON != "":
		key = []byte(p.CredentialsJSON)
	case p.CredentialsFile != "":
		b, err := os.ReadFile(p.CredentialsFile)
		if err != nil {
			return nil, nil, fmt.Errorf("credentials_file: %w", err)
		}
		key = b
	default:
		return func() (*oauth2.Token, error) {
			creds, err := google.FindDefaultCredentials(ctx, googleScope)
			if err != nil {
				return nil, err
			}
			return creds.TokenSource.Token()
		}, nil, nil
	}
	if problems := config.CredentialsProblems(key); len(problems) > 0 {
		return nil, nil, fmt.Errorf("credentials: %s", strings.Join(problems, "; "))
	}
	var head struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(key, &head); err != nil {
		return nil, nil, errors.New("credentials: not a JSON object")
	}
	// validate once, so a broken key fails at start with a clear message
	if _, err := google.CredentialsFromJSONWithType(ctx, key, google.CredentialsType(head.Type), googleScope); err != nil {
		return nil, nil, fmt.Errorf("credentials: %s", credentialsErr(err))
	}
	return func() (*oauth2.Token, error) {
		creds, err := google.CredentialsFromJSONWithType(ctx, key, google.CredentialsType(head.Type), googleScope)
		if err != nil {
			return nil, err
		}
		return creds.TokenSource.Token()
	}, key, nil
}

// credentialsErr describes a credentials error without quoting the key.
func credentialsErr(err error) string {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		return fmt.Sprintf("the token endpoint refused (HTTP %d)", re.Response.StatusCode)
	}
	msg := err.Error()
	if len(msg) > 200 {
		msg = msg[:200]
	}
	return msg
}

// startTokenKeeper fetches the first token (bounded by tokenStartTimeout;
// a failure is remembered, not fatal: requests fail as auth errors until a
// background retry succeeds) and starts the refresh goroutine. after
// is time.After outside tests.
func startTokenKeeper(fetch func() (*oauth2.Token, error), now func() time.Time, after func(time.Duration) <-chan time.Time) *tokenKeeper {
	ctx, cancel := context.WithCancel(context.Background())
	k := &tokenKeeper{fetch: fetch, now: now, after: after, stop: cancel, ctx: ctx, exited: make(chan struct{})}
	first := make(chan struct{})
	go func() {
		k.refresh()
		close(first)
	}()
	select {
	case <-first:
	case <-time.After(tokenStartTimeout):
		// the loop below waits for the fetch in flight, which is
		// bounded by the HTTP client's timeout
	}
	go k.loop(first)
	return k
}

// loop refreshes the token before it expires, and retries with a backoff
// while fetching fails, until Close.
func (k *tokenKeeper) loop(first <-chan struct{}) {
	defer close(k.exited)
	select {
	case <-first:
	case <-k.ctx.Done():
		return
	}
	backoff := time.Second
	for {
		wait := backoff
		if t := k.tok.Load(); t != nil && k.lastErr.Load() == nil {
			wait = max(refreshIn(t, k.now()), tokenRefreshMin)
			backoff = time.Second
		} else {
			backoff = min(2*backoff, tokenRetryMax)
		}
		select {
		case <-k.ctx.Done():
			return
		case <-k.after(wait):
		}
		k.refresh()
	}
}

// refreshIn is how long to wait before refreshing t: until
// tokenRefreshBefore ahead of its expiry, or half its remaining life when
// that is shorter; a token with no expiry is refreshed hourly.
func refreshIn(t *oauth2.Token, now time.Time) time.Duration {
	if t.Expiry.IsZero() {
		return time.Hour
	}
	left := t.Expiry.Sub(now)
	if left <= 0 {
		return 0
	}
	if left > 2*tokenRefreshBefore {
		return left - tokenRefreshBefore
	}
	return left / 2
}

// refresh makes one fetch and publishes its token or its failure.
func (k *tokenKeeper) refresh() {
	t, err := k.fetch()
	switch {
	case err != nil:
	case t == nil || t.AccessToken == "":
		err = errors.New("the token endpoint returned no access token")
	case !t.Expiry.IsZero() && !k.now().Before(t.Expiry):
		// expires_in <= 0, or an id_token whose exp has passed: a failed
		// refresh (retried with the backoff), not a token to refresh at once
		err = errors.New("the token endpoint returned an expired token")
	}
	if err != nil {
		msg := credentialsErr(err)
		k.lastErr.Store(&msg)
		return
	}
	if old := k.tok.Swap(t); old != nil {
		k.prev.Store(old)
	}
	k.lastErr.Store(nil)
}

// token returns the current access token, or an auth error when there is
// none that is still valid: the gateway answers 502 upstream_auth_error
// (SPEC 15) and fails over.
func (k *tokenKeeper) token() (string, error) {
	t := k.tok.Load()
	if t != nil && (t.Expiry.IsZero() || k.now().Before(t.Expiry)) {
		return t.AccessToken, nil
	}
	why := "no access token yet"
	if e := k.lastErr.Load(); e != nil {
		why = *e
	}
	return "", &Error{Class: routing.ClassAuth, Type: "upstream_auth_error", Message: "Google access token unavailable: " + why}
}

// secrets are the tokens to scrub from upstream text: the current one and
// the one before (a response in flight during a refresh may quote it).
func (k *tokenKeeper) secrets() []string {
	var out []string
	for _, t := range []*oauth2.Token{k.tok.Load(), k.prev.Load()} {
		if t != nil && len(t.AccessToken) >= minBodySecret {
			out = append(out, t.AccessToken)
		}
	}
	return out
}

// Close stops the refresh goroutine.
func (k *tokenKeeper) Close() {
	k.stop()
	<-k.exited
}

// bearerKey carries an attempt's access token to the transport.
type bearerKey struct{}

// bearerTransport sets Authorization from the attempt's context: the
// shared header maps of httpUpstream stay read-only and token-free.
type bearerTransport struct{ rt http.RoundTripper }

// RoundTrip implements http.RoundTripper.
func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	tok, _ := r.Context().Value(bearerKey{}).(string)
	if tok == "" {
		return b.rt.RoundTrip(r)
	}
	r2 := r.Clone(r.Context())
	r2.Header.Set("Authorization", "Bearer "+tok)
	return b.rt.RoundTrip(r2)
}

// CloseIdleConnections lets a retired adapter release its pool.
func (b bearerTransport) CloseIdleConnections() {
	if c, ok := b.rt.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
