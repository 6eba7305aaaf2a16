package sessions

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"switchyard/catalog"
	"switchyard/wire"
)

func parse(t testing.TB, format wire.Format, body string) *wire.Request {
	t.Helper()
	r, err := wire.Parse([]byte(body), catalog.OpChat, format)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return r
}

// openAI builds a chat body from a system prompt and alternating turns.
func openAI(t testing.TB, extra string, system string, turns ...string) *wire.Request {
	t.Helper()
	msgs := []map[string]string{{"role": "system", "content": system}}
	for i, txt := range turns {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		msgs = append(msgs, map[string]string{"role": role, "content": txt})
	}
	m, _ := json.Marshal(msgs)
	return parse(t, wire.FormatOpenAI, `{"model":"normal",`+extra+`"messages":`+string(m)+`}`)
}

func headers(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

func TestDetectPrecedence(t *testing.T) {
	body := `"prompt_cache_key":"pck","session_id":"sid","metadata":{"session_id":"msid","user_id":"uid"},"conversation":"conv",`
	tests := []struct {
		name    string
		h       http.Header
		extra   string
		source  string
		valueOf string // the id the key must equal idKey of ("" = fingerprint)
	}{
		{"x-session-id beats everything", headers("X-Session-Id", "h1", "X-Claude-Code-Session-Id", "h2"), body, "header:x-session-id", "h1"},
		{"claude code header", headers("X-Claude-Code-Session-Id", "h2", "Session-Id", "h3"), body, "header:x-claude-code-session-id", "h2"},
		{"session-id", headers("Session-Id", "h3", "Agent-Session-Id", "h4"), body, "header:session-id", "h3"},
		{"codex session_id header", headers("session_id", "h5", "conversation_id", "h6"), body, "header:session_id", "h5"},
		{"agent-session-id", headers("Agent-Session-Id", "h4", "X-Thread-Id", "h7"), body, "header:agent-session-id", "h4"},
		{"thread id", headers("X-Thread-Id", "h7"), body, "header:x-thread-id", "h7"},
		{"empty header is skipped", headers("X-Session-Id", "  "), body, "body:prompt_cache_key", "pck"},
		{"prompt_cache_key", nil, body, "body:prompt_cache_key", "pck"},
		{"session_id", nil, `"session_id":"sid","metadata":{"session_id":"msid","user_id":"uid"},"conversation":"conv",`, "body:session_id", "sid"},
		{"metadata.session_id", nil, `"metadata":{"session_id":"msid","user_id":"uid"},"conversation":"conv",`, "body:metadata.session_id", "msid"},
		{"metadata.user_id", nil, `"metadata":{"user_id":"uid"},"conversation":"conv",`, "body:metadata.user_id", "uid"},
		{"responses conversation object", nil, `"conversation":{"id":"conv"},`, "body:conversation", "conv"},
		{"fingerprint", nil, ``, SourceFingerprint, ""},
		{"credentials are never a session", headers("Authorization", "Bearer sk-team", "X-Api-Key", "sk-team", "Cookie", "session=abc", "Proxy-Authorization", "Basic x"), ``, SourceFingerprint, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := openAI(t, tt.extra, "sys", "hello")
			key, source := Detect("team-a", tt.h, r)
			if source != tt.source {
				t.Fatalf("source %q, want %q", source, tt.source)
			}
			want := makeKey("team-a", "fp", Fingerprint(r))
			if tt.valueOf != "" {
				want = idKey("team-a", tt.valueOf)
			}
			if key != want {
				t.Fatalf("key %q, want %q", key, want)
			}
		})
	}
}

func TestDetectTeamScoping(t *testing.T) {
	r := openAI(t, "", "sys", "hello")
	h := headers("X-Session-Id", "same")
	a, _ := Detect("team-a", h, r)
	b, _ := Detect("team-b", h, r)
	if a == b {
		t.Fatal("same session id in two teams shares a key")
	}
	if !strings.HasPrefix(a, "team-a:id:") || len(a) != len("team-a:id:")+16 {
		t.Fatalf("key shape %q", a)
	}
	fa, _ := Detect("team-a", nil, r)
	fb, _ := Detect("team-b", nil, r)
	if fa == fb || !strings.HasPrefix(fa, "team-a:fp:") {
		t.Fatalf("fingerprints not scoped: %q %q", fa, fb)
	}
	// a header and a body field carrying the same id are one session
	hb, _ := Detect("team-a", nil, openAI(t, `"session_id":"same",`, "sys", "hello"))
	if hb != a {
		t.Fatalf("header id %q and body id %q differ", a, hb)
	}
}

func TestDetectNeverReadsCredentials(t *testing.T) {
	r := openAI(t, "", "sys", "hello")
	k1, _ := Detect("t", headers("Authorization", "Bearer one"), r)
	k2, _ := Detect("t", headers("Authorization", "Bearer two"), r)
	if k1 != k2 {
		t.Fatal("the key depends on the Authorization header")
	}
}

func TestFingerprint(t *testing.T) {
	const sys = "You are a helpful coding assistant."
	turn1 := openAI(t, "", sys, "Fix my build")
	turn5 := openAI(t, "", sys, "Fix my build", "Sure, what error?", "undefined: foo", "Add an import.", "done, thanks", "Great", "one more thing", "ok", "now it works")
	k1, s1 := Detect("t", nil, turn1)
	k5, _ := Detect("t", nil, turn5)
	if s1 != SourceFingerprint || k1 != k5 {
		t.Fatalf("turn 1 %q and turn 5 %q differ", k1, k5)
	}
	different := map[string]*wire.Request{
		"system prompt": openAI(t, "", sys+" Be brief.", "Fix my build"),
		"first message": openAI(t, "", sys, "Fix my tests"),
		"tools":         openAI(t, `"tools":[{"type":"function","function":{"name":"ls"}}],`, sys, "Fix my build"),
		"model":         parse(t, wire.FormatOpenAI, `{"model":"other","messages":[{"role":"system","content":"`+sys+`"},{"role":"user","content":"Fix my build"}]}`),
	}
	for name, r := range different {
		if k, _ := Detect("t", nil, r); k == k1 {
			t.Errorf("a different %s gives the same fingerprint", name)
		}
	}
	// a system message injected after the first user turn does not move the session
	later := parse(t, wire.FormatOpenAI, `{"model":"normal","messages":[{"role":"system","content":"`+sys+`"},{"role":"user","content":"Fix my build"},{"role":"system","content":"reminder"},{"role":"user","content":"and?"}]}`)
	if k, _ := Detect("t", nil, later); k != k1 {
		t.Error("a later system message changed the fingerprint")
	}
}

func TestFingerprintAnthropic(t *testing.T) {
	body := func(system, rest string) *wire.Request {
		return parse(t, wire.FormatAnthropic, `{"model":"normal","max_tokens":100,"system":"`+system+`","messages":[{"role":"user","content":"hi"}`+rest+`]}`)
	}
	k1, _ := Detect("t", nil, body("agent prompt", ""))
	k2, _ := Detect("t", nil, body("agent prompt", `,{"role":"assistant","content":"hello"},{"role":"user","content":"go on"}`))
	k3, _ := Detect("t", nil, body("other prompt", ""))
	if k1 != k2 || k1 == k3 {
		t.Fatalf("k1 %q k2 %q k3 %q", k1, k2, k3)
	}
}

func TestDetectNoSession(t *testing.T) {
	r, err := wire.Parse([]byte(`{"model":"embed","input":"hello"}`), catalog.OpEmbeddings, wire.FormatOpenAI)
	if err != nil {
		t.Fatal(err)
	}
	if k, s := Detect("t", nil, r); k != "" || s != "" {
		t.Fatalf("embeddings got session %q from %q", k, s)
	}
	if k, s := Detect("t", headers("X-Session-Id", "abc"), r); k == "" || s != "header:x-session-id" {
		t.Fatalf("explicit id on embeddings: %q %q", k, s)
	}
	if k, _ := Detect("t", nil, nil); k != "" {
		t.Fatal("nil request has a session")
	}
}

func BenchmarkDetect(b *testing.B) {
	tools := `"tools":[` + strings.Repeat(`{"type":"function","function":{"name":"read_file","description":"Read a file from the repository and return its contents."}},`, 40) + `{"type":"function","function":{"name":"x"}}],`
	sys := strings.Repeat("You are a coding agent. Follow the repository conventions. ", 300)
	r := openAI(b, tools, sys, "Fix the build", "ok", strings.Repeat("later turn text ", 2000))
	b.Run("fingerprint", func(b *testing.B) {
		b.SetBytes(int64(len(sys) + len(r.ToolsRaw)))
		b.ReportAllocs()
		for b.Loop() {
			Detect("team", nil, r)
		}
	})
	h := headers("X-Claude-Code-Session-Id", "0f5e2c1a-8d4b-4c1e-9b7a-2f3d4e5a6b7c")
	b.Run("header", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			Detect("team", h, r)
		}
	})
}

// TestDetectRawHeaderNames reads headers the way the server does, from the
// wire, to pin down the canonical names of Codex's lower-case headers.
func TestDetectRawHeaderNames(t *testing.T) {
	raw := "POST /v1/responses HTTP/1.1\r\nHost: x\r\nsession_id: codex-1\r\nauthorization: Bearer k\r\n\r\n"
	req, err := http.ReadRequest(bufio.NewReader(strings.NewReader(raw)))
	if err != nil {
		t.Fatal(err)
	}
	key, source := Detect("t", req.Header, openAI(t, "", "sys", "hi"))
	if source != "header:session_id" || key != idKey("t", "codex-1") {
		t.Fatalf("got %q from %q", key, source)
	}
}
