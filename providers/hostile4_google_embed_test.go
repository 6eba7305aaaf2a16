package providers

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"switchyard/catalog"
	"switchyard/wire"
)

// TestHostile4GoogleEmbedCountMismatchStatus: a batchEmbedContents answer
// (https://ai.google.dev/api/embeddings#method:-models.batchembedcontents:
// one ContentEmbedding per request, in order) with the wrong number of
// embeddings is a failed attempt, and its error must not carry the
// upstream's 200: the gateway answers the client with the last upstream
// error's status (SPEC 7.3, 14: "502 if there was none"), so a 2xx there
// sends an error body under a success status.
func TestHostile4GoogleEmbedCountMismatchStatus(t *testing.T) {
	for _, body := range []string{`{"embeddings":[]}`, `{}`, `{"embeddings":[{"values":[1]},{"values":[2]},{"values":[3]}]}`} {
		t.Run(body, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				io.WriteString(w, body)
			}))
			defer srv.Close()
			p := geminiProvider(srv.URL + "/v1beta")
			a := newAdapter(t, p)
			c := parse(t, `{"model":"public","input":["a","b"]}`, catalog.OpEmbeddings, wire.FormatOpenAI)
			_, err := a.Do(t.Context(), deployment(p, "text-embedding-004"), &Request{Op: catalog.OpEmbeddings, Client: c, PromptTokens: 2})
			if err == nil {
				t.Fatal("a mismatched embeddings answer was served")
			}
			if e := AsError(err); e.Status >= 200 && e.Status < 300 {
				t.Fatalf("error %v carries status %d: the client would get a %d with an error body", err, e.Status, e.Status)
			}
		})
	}
}
