package gateway

import (
	"testing"
)

// TestAdminKeyFarExpiry: a key issued (or patched) to expire in the far
// future works until then. An expiry past 2262 overflowed the snapshot's
// Unix nanoseconds and the key answered 401 from its first request.
func TestAdminKeyFarExpiry(t *testing.T) {
	n, _ := teamsNode(t)
	cases := []struct {
		name, expires string
	}{
		{"2300", "2300-01-01T00:00:00Z"},
		{"9999", "9999-12-31T23:59:59Z"},
		{"2100", "2100-01-01T00:00:00Z"},
	}
	for _, tc := range cases {
		t.Run("issued "+tc.name, func(t *testing.T) {
			w := adm(t, n, "POST", "/admin/teams/web/keys", `{"name":"far-`+tc.name+`","expires_at":"`+tc.expires+`"}`)
			if w.Code != 201 {
				t.Fatalf("%d %s", w.Code, w.Body)
			}
			var k issuedKey
			decodeJSON(t, w, &k)
			if got := chat(t, n, k.Key, "a"); got != 200 {
				t.Fatalf("a key expiring at %s answered %d", tc.expires, got)
			}
		})
		t.Run("patched "+tc.name, func(t *testing.T) {
			var k issuedKey
			decodeJSON(t, adm(t, n, "POST", "/admin/teams/web/keys", `{"name":"patch-`+tc.name+`"}`), &k)
			if w := adm(t, n, "PATCH", "/admin/teams/web/keys/"+k.ID, `{"expires_at":"`+tc.expires+`"}`); w.Code != 200 {
				t.Fatalf("%d %s", w.Code, w.Body)
			}
			if got := chat(t, n, k.Key, "a"); got != 200 {
				t.Fatalf("a key patched to expire at %s answered %d", tc.expires, got)
			}
		})
	}
}

// TestAdminKeyModelsStar: a key of a team that allows every model may be
// issued with models ["*"] (the API takes it); it then calls what its team
// may. It was issued and then refused every model (403).
func TestAdminKeyModelsStar(t *testing.T) {
	n, _ := teamsNode(t)
	if w := adm(t, n, "PUT", "/admin/teams/ops", `{"models":["*"]}`); w.Code != 201 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	cases := []struct {
		name, body, model string
		want              int
	}{
		{"star", `{"name":"all","models":["*"]}`, "a", 200},
		{"star and a", `{"name":"all-a","models":["a","*"]}`, "b", 200},
		{"only a", `{"name":"only-a","models":["a"]}`, "b", 403},
		{"only a, a", `{"name":"only-a2","models":["a"]}`, "a", 200},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := adm(t, n, "POST", "/admin/teams/ops/keys", tc.body)
			if w.Code != 201 {
				t.Fatalf("%d %s", w.Code, w.Body)
			}
			var k issuedKey
			decodeJSON(t, w, &k)
			if got := chat(t, n, k.Key, tc.model); got != tc.want {
				t.Fatalf("key %s calling %s: %d, want %d", tc.body, tc.model, got, tc.want)
			}
		})
	}
}

// TestAdminPathIDsMustBeUTF8: an end-user id or a deployment id taken from
// the URL path is stored in the catalog's JSON, which cannot carry bytes
// that are not UTF-8 (they become U+FFFD): the write would name another id
// on every other replica and after a restart. Such ids are refused,
// naming the field; UTF-8 ones are taken.
func TestAdminPathIDsMustBeUTF8(t *testing.T) {
	n, _ := teamsNode(t)
	cases := []struct {
		name, method, path, body string
		status                   int
		field                    string
	}{
		{"user invalid byte", "PUT", "/admin/teams/web/users/bob%FF", `{"rpm":1}`, 400, "user"},
		{"user cut sequence", "PUT", "/admin/teams/web/users/carol%C3", `{"rpm":1}`, 400, "user"},
		{"user utf-8", "PUT", "/admin/teams/web/users/zo%C3%AB", `{"rpm":1}`, 201, ""},
		{"deployment invalid byte", "PUT", "/admin/deployments/d%FF", `{"model":"a","provider":"sim"}`, 422, "deployment.id"},
		{"deployment utf-8", "PUT", "/admin/deployments/d%C3%AB", `{"model":"a","provider":"sim"}`, 200, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := adm(t, n, tc.method, tc.path, tc.body)
			if tc.field == "" {
				if w.Code != tc.status {
					t.Fatalf("%d %s", w.Code, w.Body)
				}
				return
			}
			wantErr(t, w, tc.status, tc.field)
		})
	}
}
