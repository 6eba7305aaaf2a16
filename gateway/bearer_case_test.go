package gateway

import (
	"net/http"
	"testing"
)

// TestBearerSchemeAnyCase: RFC 9110 section 11.1 makes the
// authentication scheme case-insensitive; "BEARER <key>" was read as no
// key at all (401 missing API key).
func TestBearerSchemeAnyCase(t *testing.T) {
	for _, h := range []string{"Bearer sk-1", "bearer sk-1", "BEARER sk-1", "BeArEr sk-1"} {
		r, _ := http.NewRequest("GET", "/", nil)
		r.Header.Set("Authorization", h)
		if got := apiKey(r); got != "sk-1" {
			t.Errorf("%q: key %q, want sk-1", h, got)
		}
	}
	r, _ := http.NewRequest("GET", "/", nil)
	r.Header.Set("Authorization", "Basic c2stMQ==")
	if got := apiKey(r); got != "" {
		t.Errorf("Basic: key %q, want none", got)
	}
}
