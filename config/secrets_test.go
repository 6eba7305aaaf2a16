package config

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
	"time"
)

func TestServerHostileDefaults(t *testing.T) {
	c, err := Load([]byte(minimal), nil)
	if err != nil {
		t.Fatal(err)
	}
	s := c.Server
	if s.ReadHeaderTimeout != 10*time.Second || s.ReadTimeout != 30*time.Second || s.WriteTimeout != 30*time.Second ||
		s.IdleTimeout != 120*time.Second || s.MaxMessages != 10000 || s.MaxInputItems != 2048 {
		t.Fatalf("SPEC 13 defaults not applied: %+v", s)
	}
	_, err = Load([]byte(minimal+"server: {write_timeout: 0s, max_messages: 0, max_input_items: -1}\n"), nil)
	for _, want := range []string{"server.write_timeout", "server.max_messages", "server.max_input_items"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("want a problem naming %s, got %v", want, err)
		}
	}
}

// server.max_inflight_body_bytes (SPEC 14): 0 is min(16 bodies, 256 MiB)
// but never under two bodies; set, it must hold two largest bodies.
func TestMaxInflightBodyBytes(t *testing.T) {
	for _, tc := range []struct {
		server string
		want   int64
	}{
		{"", 160 << 20}, // 16 x the default 10 MiB
		{"server: {max_body_bytes: 1048576}", 16 << 20}, // 16 x 1 MiB
		{"server: {max_body_bytes: 104857600}", 256 << 20},
		{"server: {max_body_bytes: 209715200}", 400 << 20}, // two 200 MiB bodies beat the 256 MiB cap
		{"server: {max_inflight_body_bytes: 30000000}", 30000000},
	} {
		c, err := Load([]byte(minimal+tc.server+"\n"), nil)
		if err != nil {
			t.Fatalf("%q: %v", tc.server, err)
		}
		if got := c.Server.MaxInflightBodyBytes; got != tc.want {
			t.Errorf("%q: max_inflight_body_bytes %d, want %d", tc.server, got, tc.want)
		}
	}
	c, err := Load([]byte(minimal), []string{"SWITCHYARD_SERVER_MAX_INFLIGHT_BODY_BYTES=50000000"})
	if err != nil || c.Server.MaxInflightBodyBytes != 50000000 {
		t.Fatalf("env override: %v %+v", err, c)
	}
	for _, bad := range []string{"server: {max_inflight_body_bytes: 20971519}", "server: {max_inflight_body_bytes: -1}"} {
		_, err := Load([]byte(minimal+bad+"\n"), nil)
		if err == nil || !strings.Contains(err.Error(), "server.max_inflight_body_bytes: must be at least twice server.max_body_bytes (20971520)") {
			t.Errorf("%q: want a problem naming the key and the minimum, got %v", bad, err)
		}
	}
}

func TestKeyDigestIdentity(t *testing.T) {
	sum := sha256.Sum256([]byte("sk-team-key"))
	lower := "sha256:" + hex.EncodeToString(sum[:])
	upper := "sha256:" + strings.ToUpper(hex.EncodeToString(sum[:]))
	for _, k := range []string{"sk-team-key", lower, upper} {
		d, err := KeyDigest(k)
		if err != nil || d != sum {
			t.Errorf("KeyDigest(%q) = %x, %v; want %x", k, d, err, sum)
		}
	}
	for _, bad := range []string{"", "sha256:", "sha256:abc", "sha256:" + strings.Repeat("zz", 32), lower + "00"} {
		if _, err := KeyDigest(bad); err == nil {
			t.Errorf("KeyDigest(%q): want an error", bad)
		}
	}
}

// The same key in two teams, once in clear and once as its digest (lower or
// upper-case hex), used to pass validation and go to the last team.
func TestSameKeyTwoTeamsRejected(t *testing.T) {
	sum := sha256.Sum256([]byte("sk-shared"))
	for _, other := range []string{
		"sk-shared",
		"sha256:" + hex.EncodeToString(sum[:]),
		"sha256:" + strings.ToUpper(hex.EncodeToString(sum[:])),
	} {
		yml := `
providers: [{name: sim, kind: simulated}]
deployments: [{id: a, model: m, provider: sim}]
teams:
  - {name: one, keys: ["sk-shared"], models: ["*"]}
  - {name: two, keys: ["` + other + `"], models: ["*"]}
`
		_, err := Load([]byte(yml), nil)
		if err == nil || !strings.Contains(err.Error(), "teams[1].keys[0]") || !strings.Contains(err.Error(), `team "one"`) {
			t.Errorf("key %q in a second team: want a problem naming teams[1].keys[0] and team one, got %v", other, err)
		}
	}
	// twice in the same team is harmless
	sameTeam := `
providers: [{name: sim, kind: simulated}]
deployments: [{id: a, model: m, provider: sim}]
teams:
  - {name: one, keys: ["sk-shared", "sha256:` + hex.EncodeToString(sum[:]) + `"], models: ["*"]}
`
	if _, err := Load([]byte(sameTeam), nil); err != nil {
		t.Errorf("one key twice in one team: %v", err)
	}
}

func TestAdminKeyDigestForm(t *testing.T) {
	sum := sha256.Sum256([]byte("admin-secret"))
	c, err := Load([]byte(minimal+"admin: {key: \"sha256:"+strings.ToUpper(hex.EncodeToString(sum[:]))+"\"}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if d, err := KeyDigest(c.Admin.Key); err != nil || d != sum {
		t.Fatalf("admin.key digest = %x, %v", d, err)
	}
	if _, err := Load([]byte(minimal+"admin: {key: \"sha256:1234\"}\n"), nil); err == nil || !strings.Contains(err.Error(), "admin.key") {
		t.Fatalf("a malformed sha256: admin key must be a problem naming admin.key, got %v", err)
	}
}

// A malformed redis.url used to be quoted whole, password included.
func TestRedisURLPasswordNeverPrinted(t *testing.T) {
	for _, u := range []string{
		"redis://:hunter2-pass@127.0.0.1:6379/0%zz",
		"http://user:hunter2-pass@10.0.0.1:6379",
		"redis//:hunter2-pass@host",
	} {
		_, err := Load([]byte(minimal), []string{"SWITCHYARD_REDIS_URL=" + u})
		if err == nil {
			t.Fatalf("%s: want a problem", u)
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("problem leaks the password: %v", err)
		}
		if !strings.Contains(err.Error(), "redis.url") {
			t.Errorf("problem does not name redis.url: %v", err)
		}
	}
}

func TestRedactURL(t *testing.T) {
	cases := []struct{ in, want string }{
		{"redis://:pw@host:6379/0", "redis://:xxxxx@host:6379/0"},
		{"redis://user:pw@host:6379", "redis://user:xxxxx@host:6379"},
		{"https://api.example.com/v1?key=abc&v=1", "https://api.example.com/v1?key=xxxxx&v=xxxxx"},
		{"redis://host:6379", "redis://host:6379"},
		{"redis://:pw@host:6379/0%zz", "redis://xxxxx@host:6379/0%zz"},
		{"::pw@host", "xxxxx@host"},
	}
	for _, c := range cases {
		if got := RedactURL(c.in); got != c.want {
			t.Errorf("RedactURL(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	msg := `parse "redis://:p%40ss@h:1/x": invalid port; p@ss`
	if got := RedactIn(msg, "redis://:p%40ss@h:1/x"); strings.Contains(got, "p%40ss") || strings.Contains(got, "p@ss") {
		t.Errorf("RedactIn left the password: %q", got)
	}
}

// FuzzRedactURL: a URL's password never survives redaction, whatever the
// URL looks like, and redaction never panics.
func FuzzRedactURL(f *testing.F) {
	for _, s := range []string{"redis://:pw@host:6379/0", "redis://u:pw@h/0%zz", "https://h/v1?k=v", "::@@//", "redis://a@b@c/d?x=y#z"} {
		f.Add(s, "Secret-Pass")
	}
	f.Fuzz(func(t *testing.T, prefix, pass string) {
		if len(pass) < 4 || strings.ContainsAny(pass, ":@/?#%&= \t\r\n") {
			return
		}
		raw := "redis://user:" + pass + "@" + prefix
		if strings.ContainsAny(prefix, "@") || strings.Contains(prefix, pass) || strings.Contains(redacted, pass) {
			return // a second @ makes the password part of a longer userinfo; the host may hold the same text
		}
		// the userinfo (before the last @) never keeps it; the rest may hold
		// the same text by chance or through escaping
		if got := RedactURL(raw); strings.Contains(got[:max(strings.LastIndex(got, "@"), 0)], pass) {
			t.Fatalf("RedactURL(%q) = %q keeps the password", raw, got)
		}
		if got := RedactIn("dial "+raw+" failed", raw); strings.Contains(got, pass) {
			t.Fatalf("RedactIn keeps the password: %q", got)
		}
	})
}

// FuzzKeyDigest: a parsed digest round-trips through its sha256: form in
// both cases of hex, and parsing never panics.
func FuzzKeyDigest(f *testing.F) {
	for _, s := range []string{"sk-1", "sha256:" + strings.Repeat("ab", 32), "sha256:", "sha256:XYZ", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		d, err := KeyDigest(key)
		if err != nil {
			return
		}
		for _, form := range []string{hex.EncodeToString(d[:]), strings.ToUpper(hex.EncodeToString(d[:]))} {
			if d2, err := KeyDigest("sha256:" + form); err != nil || d2 != d {
				t.Fatalf("digest form of %q does not round-trip: %v", key, err)
			}
		}
	})
}
