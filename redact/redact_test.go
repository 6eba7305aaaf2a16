package redact

import (
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

func TestCredentials(t *testing.T) {
	cases := []struct {
		name, in, want string
	}{
		{"openai key", "Incorrect API key provided: sk-upstream-SECRET123456.", "Incorrect API key provided: sk-ups****."},
		{"anthropic key", "key sk-ant-api03-abcdefghijklmnopqrstuv rejected", "key sk-ant**** rejected"},
		{"aws id", "AKIAIOSFODNN7EXAMPLE and ASIAIOSFODNN7EXAMPL1", "AKIAIO**** and ASIAIO****"},
		{"google key", "AIzaSyA-1234567890abcdefghijklmnopqrstu", "AIzaSy****"},
		{"bearer", "Authorization: Bearer abc.def-ghi_jkl/mno+pqr=", "Authorization: Bearer****"},
		{"jwt", "token eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiIxMjM0NSJ9.c2lnbmF0dXJlLXNpZw", "token eyJhbG****"},
		{"json escaped hyphen", `{"message":"key sk\u002dupstream\u002dSECRET123456"}`, `{"message":"key sk\u002dups****"}`},
		{"json escaped letters", `"sk-\u0041\u0042CDEFGHIJKLMNOPQRS"`, `"sk-\u0041\u0042C****"`},
		{"short sk is no key", "sk-short", "sk-short"},
		{"word containing sk-", "task-0123456789abcdefghij done", "task-0123456789abcdefghij done"},
		{"plain text", "model busy, retry in 2s", "model busy, retry in 2s"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Credentials(c.in); got != c.want {
				t.Errorf("Credentials(%q) = %q, want %q", c.in, got, c.want)
			}
		})
	}
}

// A JSON body keeps being valid JSON once masked, and the escaped secret is
// gone from its decoded text too.
func TestCredentialsInJSON(t *testing.T) {
	b, _ := json.Marshal(map[string]string{"message": "bad key sk-upstream-SECRET123456 <tag>"}) // encoding/json escapes < and >
	raw := strings.Replace(string(b), "sk-upstream", `sk\u002dupstream`, 1)
	out := Credentials(raw)
	var v map[string]string
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("masked JSON %q no longer parses: %v", out, err)
	}
	if strings.Contains(v["message"], "SECRET") {
		t.Fatalf("decoded message still holds the key: %q", v["message"])
	}
}

// FuzzCredentials: a key placed anywhere in any text is masked, and
// masking never panics or grows text without bound.
func FuzzCredentials(f *testing.F) {
	for _, s := range []string{"", "key: ", "\\u00", "\\", "Bearer ", "eyJ.", "sk", "\xff"} {
		f.Add(s, s, uint8(0))
	}
	keys := []string{"sk-upstream-SECRET123456", "AKIAIOSFODNN7EXAMPLE", "AIzaSyA-1234567890abcdefghijklmnopqrstu"}
	f.Fuzz(func(t *testing.T, before, after string, which uint8) {
		key := keys[int(which)%len(keys)]
		in := before + " " + key + " " + after
		out := Credentials(in)
		if strings.Contains(out, key) {
			t.Fatalf("Credentials(%q) = %q keeps %q", in, out, key)
		}
		if len(out) > len(in)+len(mask)*len(in) {
			t.Fatalf("output grew from %d to %d", len(in), len(out))
		}
	})
}

func TestHandlerMasksLogLines(t *testing.T) {
	var b strings.Builder
	log := slog.New(Handler(slog.NewJSONHandler(&b, nil))).With("provider", "p sk-with-0123456789abcdefgh")
	log.Warn("upstream said Bearer abcdefgh12345678", "err", errors.New("key sk-upstream-SECRET123456"),
		slog.Group("g", "inner", "AKIAIOSFODNN7EXAMPLE"), "plain", "nothing here")
	out := b.String()
	for _, leak := range []string{"0123456789abcdefgh", "abcdefgh12345678", "SECRET123456", "IOSFODNN7EXAMPLE"} {
		if strings.Contains(out, leak) {
			t.Errorf("log line keeps %q: %s", leak, out)
		}
	}
	if !strings.Contains(out, "nothing here") {
		t.Errorf("plain attribute lost: %s", out)
	}
}

// TestMaybeIsContains: the one-pass quick check answers as a Contains of
// each quick string would, on every prefix, suffix and middle of them.
func TestMaybeIsContains(t *testing.T) {
	contains := func(s string) bool {
		for _, q := range quick {
			if strings.Contains(s, q) {
				return true
			}
		}
		return false
	}
	inputs := []string{"", "s", "k", "sk", "ask", "tas", "AKI", "AKIA", "xASIAy", "AIz", "AIza", "eare", "bearer", "Bearer x", "eyJ", "ey", "req-0123456789abcdef", "gpt-4o-mini"}
	for _, q := range quick {
		for i := range len(q) + 1 {
			inputs = append(inputs, q[:i], q[i:], "x"+q[:i], q[i:]+"y")
		}
	}
	for _, s := range inputs {
		if maybe(s) != contains(s) {
			t.Errorf("maybe(%q) = %v, Contains says %v", s, maybe(s), contains(s))
		}
	}
}
