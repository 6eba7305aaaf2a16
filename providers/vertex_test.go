package providers

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"switchyard/catalog"
	"switchyard/config"
	"switchyard/routing"
	"switchyard/wire"
)

// fakeGoogle is a fake OAuth2 token endpoint and a fake Vertex AI. The
// token endpoint verifies the service account's signed JWT as Google's
// documents it (https://developers.google.com/identity/protocols/oauth2/service-account#httprest:
// grant_type jwt-bearer, an RS256 assertion whose iss is the client_email,
// aud the token_uri, with scope, iat and exp) against the test key's public
// half; Vertex checks the bearer token and answers Gemini paths
// (https://cloud.google.com/vertex-ai/generative-ai/docs/model-reference/inference)
// and Claude's rawPredict/streamRawPredict
// (https://cloud.google.com/vertex-ai/generative-ai/docs/partner-models/claude/use-claude).
type fakeGoogle struct {
	srv     *httptest.Server
	key     *rsa.PrivateKey
	email   string
	refuse  atomic.Bool  // the token endpoint answers 400 invalid_grant
	fetches atomic.Int32 // token requests that passed verification
	expires int          // expires_in of issued tokens

	mu    sync.Mutex
	paths []string
	auth  []string
	body  []byte
	errs  []string // verification failures
}

func newFakeGoogle(t *testing.T) *fakeGoogle {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeGoogle{key: key, email: "gateway@proj-1.iam.gserviceaccount.com", expires: 3600}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeGoogle) fail(format string, args ...any) {
	f.mu.Lock()
	f.errs = append(f.errs, fmt.Sprintf(format, args...))
	f.mu.Unlock()
}

func (f *fakeGoogle) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/token" {
		f.serveToken(w, r)
		return
	}
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.paths = append(f.paths, r.URL.Path+"?"+r.URL.RawQuery)
	f.auth = append(f.auth, r.Header.Get("Authorization"))
	f.body = body
	f.mu.Unlock()
	if !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ya29.test-") {
		w.WriteHeader(401)
		io.WriteString(w, `{"error":{"code":401,"message":"Request had invalid authentication credentials.","status":"UNAUTHENTICATED"}}`)
		return
	}
	if tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "); strings.Contains(string(body), "echo-token-in-") {
		// the credential quoted where the error's type and code are read
		// from: Google's error.status, Anthropic's error.type, a string code
		w.WriteHeader(400)
		if strings.Contains(string(body), "echo-token-in-status") {
			fmt.Fprintf(w, `{"error":{"code":400,"message":"bad request","status":%q}}`, tok)
		} else {
			fmt.Fprintf(w, `{"type":"error","error":{"type":%q,"code":%q,"message":"bad request"}}`, tok, tok)
		}
		return
	}
	if strings.Contains(string(body), "echo-token") {
		// a hostile or broken upstream quoting the credential
		w.WriteHeader(400)
		fmt.Fprintf(w, `{"error":{"code":400,"message":"bad request from %s","status":"INVALID_ARGUMENT"}}`, r.Header.Get("Authorization"))
		return
	}
	switch {
	case strings.HasSuffix(r.URL.Path, ":rawPredict"):
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, anthropicSync)
	case strings.HasSuffix(r.URL.Path, ":streamRawPredict"):
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range anthropicToolStream {
			io.WriteString(w, "event: "+ev.name+"\ndata: "+ev.data+"\n\n")
		}
	case strings.HasSuffix(r.URL.Path, ":streamGenerateContent"):
		w.Header().Set("Content-Type", "text/event-stream")
		b, _ := os.ReadFile(filepath.Join(geminiDir, "stream_tools.sse"))
		w.Write(b)
	default:
		w.Header().Set("Content-Type", "application/json")
		b, _ := os.ReadFile(filepath.Join(geminiDir, "resp_text.json"))
		w.Write(b)
	}
}

// serveToken checks the JWT bearer grant and issues ya29.test-N.
func (f *fakeGoogle) serveToken(w http.ResponseWriter, r *http.Request) {
	if f.refuse.Load() {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(400)
		io.WriteString(w, `{"error":"invalid_grant","error_description":"Invalid JWT Signature."}`)
		return
	}
	if err := r.ParseForm(); err != nil {
		f.fail("form: %v", err)
	}
	if g := r.PostForm.Get("grant_type"); g != "urn:ietf:params:oauth:grant-type:jwt-bearer" {
		f.fail("grant_type %q", g)
	}
	parts := strings.Split(r.PostForm.Get("assertion"), ".")
	if len(parts) != 3 {
		f.fail("assertion has %d parts", len(parts))
		w.WriteHeader(400)
		return
	}
	var head struct{ Alg, Kid string }
	var claims struct {
		Iss, Scope, Aud string
		Iat, Exp        int64
	}
	hb, _ := base64.RawURLEncoding.DecodeString(parts[0])
	cb, _ := base64.RawURLEncoding.DecodeString(parts[1])
	sig, _ := base64.RawURLEncoding.DecodeString(parts[2])
	json.Unmarshal(hb, &head)
	json.Unmarshal(cb, &claims)
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if err := rsa.VerifyPKCS1v15(&f.key.PublicKey, crypto.SHA256, sum[:], sig); err != nil {
		f.fail("signature: %v", err)
		w.WriteHeader(400)
		io.WriteString(w, `{"error":"invalid_grant"}`)
		return
	}
	if head.Alg != "RS256" || head.Kid != "kid-1" || claims.Iss != f.email || claims.Scope != googleScope ||
		claims.Aud != f.srv.URL+"/token" || claims.Exp <= claims.Iat {
		f.fail("jwt %+v %+v", head, claims)
	}
	n := f.fetches.Add(1)
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"access_token":"ya29.test-%d","token_type":"Bearer","expires_in":%d}`, n, f.expires)
}

// keyJSON is the service-account key file, token_uri pointing at the fake.
func (f *fakeGoogle) keyJSON() string {
	der, _ := x509.MarshalPKCS8PrivateKey(f.key)
	pemKey := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	b, _ := json.Marshal(map[string]string{
		"type": "service_account", "project_id": "proj-1", "private_key_id": "kid-1", "private_key": string(pemKey),
		"client_email": f.email, "client_id": "1234", "token_uri": f.srv.URL + "/token",
	})
	return string(b)
}

func (f *fakeGoogle) check(t *testing.T) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.errs) > 0 {
		t.Fatalf("token endpoint: %v", f.errs)
	}
}

func vertexProvider(f *fakeGoogle, region string) *catalog.Provider {
	return &catalog.Provider{Provider: config.Provider{Name: "vx", Kind: KindVertex, BaseURL: f.srv.URL, Project: "proj-1", Region: region, CredentialsJSON: f.keyJSON()}}
}

func newVertexAdapter(t *testing.T, p *catalog.Provider) Adapter {
	t.Helper()
	a := newAdapter(t, p)
	t.Cleanup(a.(*vertex).CloseIdleConnections)
	return a
}

func TestVertexGeminiAndClaude(t *testing.T) {
	f := newFakeGoogle(t)
	p := vertexProvider(f, "europe-west4")
	a := newVertexAdapter(t, p)
	if f.fetches.Load() != 1 {
		t.Fatalf("token fetched %d times at start, want 1 (before any request)", f.fetches.Load())
	}
	ctx := context.Background()

	resp, err := a.Do(ctx, deployment(p, "gemini-2.5-flash"), chatReq(t, `{"model":"m","messages":[{"role":"user","content":"Capital?"}]}`, wire.FormatOpenAI))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Usage != (Usage{PromptTokens: 120, CompletionTokens: 39, CachedTokens: 100, ReasoningTokens: 30}) || !strings.Contains(string(resp.Body), "capital of France") {
		t.Fatalf("gemini on vertex %s %+v", resp.Body, resp.Usage)
	}
	resp, err = a.Do(ctx, deployment(p, "gemini-2.5-flash"), chatReq(t, `{"model":"m","stream":true,"messages":[{"role":"user","content":"Weather?"}]}`, wire.FormatOpenAI))
	if err != nil {
		t.Fatal(err)
	}
	all, err := drain(t, resp.Stream)
	if err != nil || !strings.Contains(string(all), `"finish_reason":"tool_calls"`) {
		t.Fatalf("gemini stream on vertex %s %v", all, err)
	}

	// Claude: rawPredict, the Messages body without model, with anthropic_version
	resp, err = a.Do(ctx, deployment(p, "claude-sonnet-4@20250514"), chatReq(t, `{"model":"m","max_tokens":100,"messages":[{"role":"user","content":"Hi"}]}`, wire.FormatAnthropic))
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	sent := string(f.body)
	f.mu.Unlock()
	assertJSON(t, []byte(sent), `{"max_tokens":100,"messages":[{"role":"user","content":"Hi"}],"anthropic_version":"vertex-2023-10-16"}`)
	if string(resp.Body) != anthropicSync || resp.Usage != (Usage{PromptTokens: 15, CompletionTokens: 3, CachedTokens: 5}) {
		t.Fatalf("claude on vertex %s %+v", resp.Body, resp.Usage)
	}
	resp, err = a.Do(ctx, deployment(p, "claude-sonnet-4@20250514"), chatReq(t, `{"model":"m","stream":true,"messages":[{"role":"user","content":"Hi"}]}`, wire.FormatOpenAI))
	if err != nil {
		t.Fatal(err)
	}
	all, err = drain(t, resp.Stream)
	if err != nil || !strings.Contains(string(all), `"tool_calls"`) || !strings.HasSuffix(string(all), "data: [DONE]\n\n") {
		t.Fatalf("claude stream on vertex %s %v", all, err)
	}

	f.mu.Lock()
	paths, auth := f.paths, f.auth
	f.mu.Unlock()
	base := "/v1/projects/proj-1/locations/europe-west4/publishers/"
	want := []string{
		base + "google/models/gemini-2.5-flash:generateContent?",
		base + "google/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
		base + "anthropic/models/claude-sonnet-4@20250514:rawPredict?",
		base + "anthropic/models/claude-sonnet-4@20250514:streamRawPredict?",
	}
	if strings.Join(paths, "\n") != strings.Join(want, "\n") {
		t.Fatalf("paths\n%s\nwant\n%s", strings.Join(paths, "\n"), strings.Join(want, "\n"))
	}
	for _, h := range auth {
		if h != "Bearer ya29.test-1" {
			t.Fatalf("authorization %q", h)
		}
	}
	if n := f.fetches.Load(); n != 1 {
		t.Fatalf("%d token fetches for 4 requests, want 1", n)
	}
	f.check(t)
}

func TestVertexURLs(t *testing.T) {
	f := newFakeGoogle(t)
	for region, want := range map[string]string{
		"us-central1": "https://us-central1-aiplatform.googleapis.com/v1/projects/proj-1/locations/us-central1/publishers/",
		"global":      "https://aiplatform.googleapis.com/v1/projects/proj-1/locations/global/publishers/",
	} {
		p := vertexProvider(f, region)
		p.BaseURL = ""
		v := newVertexAdapter(t, p).(*vertex)
		if v.google.prefix != want+"google" || v.claude != want+"anthropic" {
			t.Errorf("%s: %s %s", region, v.google.prefix, v.claude)
		}
	}
	if _, err := New(&catalog.Provider{Provider: config.Provider{Name: "v", Kind: KindVertex, Region: "x"}}); err == nil {
		t.Error("vertex without project accepted")
	}
	if _, err := New(&catalog.Provider{Provider: config.Provider{Name: "v", Kind: KindVertex, Project: "p", Region: "x", CredentialsJSON: `{"type":"service_account"}`}}); err == nil {
		t.Error("a key without client_email and private_key accepted")
	}
}

// TestVertexTokenRefused: a token endpoint that refuses makes every request
// an auth failure (the gateway answers 502 upstream_auth_error) without
// calling Vertex, and the request path never asks the endpoint itself.
func TestVertexTokenRefused(t *testing.T) {
	f := newFakeGoogle(t)
	f.refuse.Store(true)
	p := vertexProvider(f, "us-east5")
	a := newVertexAdapter(t, p)
	for i := 0; i < 3; i++ {
		_, err := a.Do(context.Background(), deployment(p, "gemini-2.5-flash"), chatReq(t, `{"model":"m","messages":[{"role":"user","content":"Hi"}]}`, wire.FormatOpenAI))
		e := wantClass(t, err, routing.ClassAuth)
		if !strings.Contains(e.Message, "token endpoint refused") {
			t.Fatalf("message %q", e.Message)
		}
	}
	f.mu.Lock()
	n := len(f.paths)
	f.mu.Unlock()
	if n != 0 {
		t.Fatalf("vertex called %d times without a token", n)
	}
}

// TestVertexScrubsToken: an upstream that quotes the bearer token gets it
// redacted from the error the gateway relays and records.
func TestVertexScrubsToken(t *testing.T) {
	f := newFakeGoogle(t)
	p := vertexProvider(f, "us-east5")
	a := newVertexAdapter(t, p)
	_, err := a.Do(context.Background(), deployment(p, "gemini-2.5-flash"), chatReq(t, `{"model":"m","messages":[{"role":"user","content":"echo-token"}]}`, wire.FormatOpenAI))
	e := wantClass(t, err, routing.ClassBadRequest)
	if strings.Contains(e.Message, "ya29.test-1") || strings.Contains(string(e.body), "ya29.test-1") || !strings.Contains(e.Message, redactedSecret) && !strings.Contains(e.Message, "Bearer****") {
		t.Fatalf("token relayed: %q %s", e.Message, e.body)
	}
	sc := vertexScrubber(p, []byte(p.CredentialsJSON))
	der, _ := x509.MarshalPKCS8PrivateKey(f.key)
	pemKey := string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	escaped, _ := json.Marshal(pemKey)
	for _, leak := range []string{pemKey, string(escaped)} {
		if got := sc.String("oops " + leak + " kid-1"); strings.Contains(got, "PRIVATE KEY") || !strings.Contains(got, redactedSecret) {
			t.Fatalf("private key not scrubbed: %q", got)
		}
	}
}

// TestVertexADC: with neither credentials_file nor credentials_json, the
// token comes from Application Default Credentials (here the key file
// GOOGLE_APPLICATION_CREDENTIALS names).
func TestVertexADC(t *testing.T) {
	f := newFakeGoogle(t)
	path := filepath.Join(t.TempDir(), "sa.json")
	if err := os.WriteFile(path, []byte(f.keyJSON()), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", path)
	p := vertexProvider(f, "us-east5")
	p.CredentialsJSON = ""
	a := newVertexAdapter(t, p)
	if _, err := a.Do(context.Background(), deployment(p, "gemini-2.5-flash"), chatReq(t, `{"model":"m","messages":[{"role":"user","content":"Hi"}]}`, wire.FormatOpenAI)); err != nil {
		t.Fatal(err)
	}
	p.CredentialsFile = path
	a = newVertexAdapter(t, p)
	if _, err := a.Do(context.Background(), deployment(p, "gemini-2.5-flash"), chatReq(t, `{"model":"m","messages":[{"role":"user","content":"Hi"}]}`, wire.FormatOpenAI)); err != nil {
		t.Fatal(err)
	}
	if f.fetches.Load() != 2 {
		t.Fatalf("fetches %d, want one per adapter", f.fetches.Load())
	}
	f.check(t)
}

// TestTokenKeeperRefresh drives the background refresh on a fake clock: the
// keeper waits until tokenRefreshBefore ahead of expiry, fetches, and
// requests see the new token without fetching; a failed refresh keeps the
// still-valid token and retries with a backoff.
func TestTokenKeeperRefresh(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var clock atomic.Pointer[time.Time]
	clock.Store(&now)
	var fetchErr atomic.Bool
	var n atomic.Int32
	fetch := func() (*oauth2.Token, error) {
		if fetchErr.Load() {
			return nil, fmt.Errorf("endpoint down")
		}
		i := n.Add(1)
		return &oauth2.Token{AccessToken: fmt.Sprintf("tok-%d-long-enough", i), Expiry: clock.Load().Add(time.Hour)}, nil
	}
	waits := make(chan time.Duration)
	ticks := make(chan time.Time)
	after := func(d time.Duration) <-chan time.Time {
		waits <- d
		return ticks
	}
	k := startTokenKeeper(fetch, func() time.Time { return *clock.Load() }, after)
	defer func() {
		go func() {
			for range waits {
			}
		}()
		k.Close()
		close(waits)
	}()
	if tok, err := k.token(); err != nil || tok != "tok-1-long-enough" {
		t.Fatalf("first token %q %v", tok, err)
	}
	if d := <-waits; d != time.Hour-tokenRefreshBefore {
		t.Fatalf("refresh scheduled in %s", d)
	}
	later := now.Add(56 * time.Minute)
	clock.Store(&later)
	ticks <- later
	if d := <-waits; d != time.Hour-tokenRefreshBefore {
		t.Fatalf("next refresh in %s", d)
	}
	if tok, _ := k.token(); tok != "tok-2-long-enough" || n.Load() != 2 {
		t.Fatalf("after refresh: %q, %d fetches", tok, n.Load())
	}
	if s := k.secrets(); len(s) != 2 {
		t.Fatalf("scrubbed tokens %v", s)
	}
	for i := 0; i < 5; i++ {
		if _, err := k.token(); err != nil {
			t.Fatal(err)
		}
	}
	if n.Load() != 2 {
		t.Fatalf("requests fetched tokens: %d", n.Load())
	}
	fetchErr.Store(true)
	ticks <- later
	if d := <-waits; d != time.Second {
		t.Fatalf("retry after a failed refresh in %s", d)
	}
	if tok, err := k.token(); err != nil || tok != "tok-2-long-enough" {
		t.Fatalf("still-valid token lost after a failed refresh: %q %v", tok, err)
	}
	expired := later.Add(2 * time.Hour)
	clock.Store(&expired)
	if _, err := k.token(); err == nil {
		t.Fatal("expired token served")
	} else {
		wantClass(t, err, routing.ClassAuth)
	}
}

func TestRefreshIn(t *testing.T) {
	now := time.Unix(1000, 0)
	for _, tc := range []struct {
		left, want time.Duration
	}{
		{time.Hour, 55 * time.Minute}, {8 * time.Minute, 4 * time.Minute}, {-time.Second, 0},
	} {
		if got := refreshIn(&oauth2.Token{Expiry: now.Add(tc.left)}, now); got != tc.want {
			t.Errorf("%s left: %s, want %s", tc.left, got, tc.want)
		}
	}
}

// TestTokenKeeperExpiredToken: a token endpoint that answers with a token
// already expired (expires_in <= 0 for a user credential; an id_token
// whose exp has passed for a service account) does not make the keeper
// fetch again at once, forever: the token is a failed refresh, retried
// with the backoff, and requests get an auth error saying why.
func TestTokenKeeperExpiredToken(t *testing.T) {
	for _, expiresIn := range []int{-60, -1} {
		var fetches atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fetches.Add(1)
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"access_token":"ya29.expired-token","token_type":"Bearer","expires_in":%d}`, expiresIn)
		}))
		key, _ := json.Marshal(map[string]string{"type": "authorized_user", "client_id": "cid", "client_secret": "csecret-0123456789",
			"refresh_token": "rtoken-0123456789", "token_uri": srv.URL + "/token"})
		p := &catalog.Provider{Provider: config.Provider{Name: "vx", Kind: KindVertex, Project: "p", Region: "us-east5", CredentialsJSON: string(key)}}
		fetch, _, err := googleTokenFetcher(p, srv.Client())
		if err != nil {
			t.Fatal(err)
		}
		// the scenario is reachable: the library hands back an expired token
		if tok, err := fetch(); err != nil || tok.Expiry.IsZero() || tok.Expiry.After(time.Now()) {
			t.Fatalf("expires_in %d: token %+v, %v", expiresIn, tok, err)
		}
		waits := make(chan time.Duration)
		ticks := make(chan time.Time)
		after := func(d time.Duration) <-chan time.Time {
			waits <- d
			return ticks
		}
		k := startTokenKeeper(fetch, time.Now, after)
		for i, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
			if d := <-waits; d != want {
				t.Errorf("expires_in %d: refresh %d scheduled in %s, want the retry backoff %s", expiresIn, i+1, d, want)
			}
			if _, err := k.token(); err == nil {
				t.Errorf("expires_in %d: an expired token served", expiresIn)
			} else if e := wantClass(t, err, routing.ClassAuth); !strings.Contains(e.Message, "expired") {
				t.Errorf("expires_in %d: message %q", expiresIn, e.Message)
			}
			if i < 2 {
				ticks <- time.Now()
			}
		}
		if n := fetches.Load(); n != 3+1 { // three by the keeper, one above
			t.Errorf("expires_in %d: %d fetches", expiresIn, n)
		}
		go func() {
			for range waits {
			}
		}()
		k.Close()
		close(waits)
		srv.Close()
	}
}

// TestVertexScrubsTokenInTypeAndCode: the access token is scrubbed from
// every text field of an error the gateway relays (the type and code reach
// the client's error body too), not only from its message.
func TestVertexScrubsTokenInTypeAndCode(t *testing.T) {
	f := newFakeGoogle(t)
	p := vertexProvider(f, "us-east5")
	a := newVertexAdapter(t, p)
	for _, tc := range []struct{ model, content string }{
		{"gemini-2.5-flash", "echo-token-in-status"},
		{"gemini-2.5-flash", "echo-token-in-type"},
		{"claude-sonnet-4@20250514", "echo-token-in-type"},
	} {
		_, err := a.Do(context.Background(), deployment(p, tc.model), chatReq(t, `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"`+tc.content+`"}]}`, wire.FormatAnthropic))
		var e *Error
		if !errors.As(err, &e) {
			t.Fatalf("%s %s: %v", tc.model, tc.content, err)
		}
		for _, field := range []string{e.Type, e.Code, e.Message, string(e.body)} {
			if strings.Contains(field, "ya29.test-") {
				t.Errorf("%s %s: token relayed: type %q code %q message %q", tc.model, tc.content, e.Type, e.Code, e.Message)
				break
			}
		}
	}
}
