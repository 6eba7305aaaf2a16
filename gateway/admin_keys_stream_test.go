package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
)

// chunkRecorder records an answer and the largest single write it got.
type chunkRecorder struct {
	*httptest.ResponseRecorder
	largest int
}

func (c *chunkRecorder) Write(b []byte) (int, error) {
	c.largest = max(c.largest, len(b))
	return c.ResponseRecorder.Write(b)
}

// TestAdminTeamsStreamKeys: GET /admin/teams, /admin/teams/{name} and
// /admin/teams/{name}/keys write a team's keys one at a time, so a team of
// many keys (SPEC 16: 100,000) is never one buffer of its whole JSON: the
// largest write stays at the 32 KiB buffer. The answers are the JSON
// c.JSON wrote before, byte for byte. Before, each built every key's view
// and the whole JSON at once (one write of the team's size), for each
// console poll.
func TestAdminTeamsStreamKeys(t *testing.T) {
	n, _ := teamsNode(t)
	const keys = 700 // about 160 KB of views
	for i := range keys {
		if w := adm(t, n, "POST", "/admin/teams/web/keys", fmt.Sprintf(`{"name":"k%d","rpm":%d}`, i, i+1)); w.Code != 201 {
			t.Fatalf("%d %s", w.Code, w.Body)
		}
	}
	st := n.Server.Catalog.Load().State
	web, ok := findTeam(st, "web")
	if !ok {
		t.Fatal("no team web")
	}
	views := []teamView{}
	for _, tm := range st.Teams {
		views = append(views, viewTeam(tm))
	}
	cases := []struct {
		path string
		want any
	}{
		{"/admin/teams", gin.H{"teams": views, "version": st.Version}},
		{"/admin/teams/web", gin.H{"team": viewTeam(web), "version": st.Version}},
		{"/admin/teams/web/keys", gin.H{"keys": viewTeam(web).Keys, "team": "web", "version": st.Version}},
	}
	for _, tc := range cases {
		t.Run(tc.path, func(t *testing.T) {
			want, err := json.Marshal(tc.want)
			if err != nil {
				t.Fatal(err)
			}
			req := httptest.NewRequest("GET", tc.path, nil)
			req.Header.Set("Authorization", "Bearer "+adminKey)
			w := &chunkRecorder{ResponseRecorder: httptest.NewRecorder()}
			n.Handler().ServeHTTP(w, req)
			if w.Code != http.StatusOK || !strings.HasPrefix(w.Header().Get("Content-Type"), "application/json") {
				t.Fatalf("%d %q", w.Code, w.Header().Get("Content-Type"))
			}
			if !bytes.Equal(w.Body.Bytes(), want) {
				t.Fatalf("answer differs from the whole-object JSON:\n got %.300s\nwant %.300s", w.Body.Bytes(), want)
			}
			if len(want) < 100<<10 || w.largest > 32<<10 {
				t.Fatalf("%d bytes in writes of up to %d; want many, none over 32 KiB", len(want), w.largest)
			}
		})
	}
}
