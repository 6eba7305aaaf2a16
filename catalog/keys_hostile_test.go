package catalog

import (
	"context"
	"crypto/rand"
	"testing"
	"time"
	"unicode/utf8"

	"switchyard/config"
)

// TestKeyExpiryOutsideUnixNanoRange: an expiry the int64 of Unix
// nanoseconds cannot hold (before 1678 or after 2262, both valid RFC 3339)
// must still mean what it says. time.Time.UnixNano wraps there: a key of
// the admin API "valid until 9999" was refused at once, and a config key
// that expired in 1600 was accepted until 2184.
func TestKeyExpiryOutsideUnixNanoRange(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	cases := []struct {
		name    string
		expires string
		ok      bool
	}{
		{"far future 9999", "9999-12-31T23:59:59Z", true},
		{"far future 2300", "2300-01-01T00:00:00Z", true},
		{"last representable", "2262-04-11T00:00:00Z", true},
		{"long past 1600", "1600-01-01T00:00:00Z", false},
		{"long past 1500", "1500-01-01T00:00:00Z", false},
		{"year one", "0001-01-01T00:00:00Z", false},
		{"first representable", "1678-01-01T00:00:00Z", false},
		{"the epoch (0 ns, which means never)", "1970-01-01T00:00:00Z", false},
		{"an hour ago", now.Add(-time.Hour).Format(time.RFC3339), false},
		{"in an hour", now.Add(time.Hour).Format(time.RFC3339), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// from the config file: any RFC 3339 time is accepted there
			st := baseState()
			st.Schema = schemaVersion
			st.Teams = []TeamSpec{{Name: "web", Models: []string{"*"},
				Keys: configKeys([]config.KeySpec{{Key: "sk-cfg", ExpiresAt: tc.expires}}, now)}}
			st.normalize()
			if got := Build(&config.Config{}, st).AuthenticateAt("sk-cfg", now) != nil; got != tc.ok {
				t.Fatalf("config key expiring %s: authenticated=%v want %v", tc.expires, got, tc.ok)
			}
			// through the admin API: only future expiries are taken
			if !tc.ok {
				return
			}
			exp, err := time.Parse(time.RFC3339, tc.expires)
			if err != nil {
				t.Fatal(err)
			}
			next, iss, err := IssueKey(teamState(t), "ops", KeyInput{Name: "far", ExpiresAt: &exp}, aliases, now, rand.Reader)
			if err != nil {
				t.Fatal(err)
			}
			if Build(&config.Config{}, next).AuthenticateAt(iss.Key, now) == nil {
				t.Fatalf("a key issued to expire at %s is refused at %s", tc.expires, now.Format(time.RFC3339))
			}
		})
	}
}

// TestKeyModelsStar: a key of a team that allows every model may list "*"
// (checkKeyModels takes it: the key narrows nothing); it must then call
// what its team may, not nothing.
func TestKeyModelsStar(t *testing.T) {
	cases := []struct {
		name   string
		models []string
		allows map[string]bool
	}{
		{"star", []string{"*"}, map[string]bool{"a": true, "b": true, "normal": true}},
		{"star and a model", []string{"a", "*"}, map[string]bool{"a": true, "b": true}},
		{"one model", []string{"a"}, map[string]bool{"a": true, "b": false}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			next, iss, err := IssueKey(teamState(t), "ops", KeyInput{Name: "k", Models: tc.models}, aliases, t0, rand.Reader)
			if err != nil {
				t.Fatal(err)
			}
			team, key := Build(&config.Config{}, next).AuthenticateKey(iss.Key, t0)
			if team == nil {
				t.Fatal("the key does not authenticate")
			}
			for m, want := range tc.allows {
				if got := team.Allows(m) && key.Allows(m); got != want {
					t.Fatalf("key models %v: allows %q = %v, want %v", tc.models, m, got, want)
				}
			}
		})
	}
}

// TestNamesSurviveTheStore: an end-user id or a deployment id the admin API
// takes from its URL path must be the same after the store has carried it
// (every other replica, and this one after a restart, reads it from
// there). JSON cannot carry bytes that are not UTF-8: encoding/json writes
// U+FFFD for them, so an override saved for user "\xff" belonged to user
// "\uFFFD" everywhere else. Such a name is refused (400 naming the field)
// or kept as it is.
func TestNamesSurviveTheStore(t *testing.T) {
	cases := []struct {
		name, value string
	}{
		{"ascii", "alice"},
		{"utf-8", "zoë-日本"},
		{"invalid byte", "bob\xff"},
		{"cut sequence", "carol\xc3"},
		{"surrogate half", "dave\xed\xa0\x80"},
	}
	roundTrip := func(t *testing.T, st *State) *State {
		t.Helper()
		fs, err := NewFileStore(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		if err := fs.Save(context.Background(), 0, st); err != nil {
			t.Fatal(err)
		}
		got, ok, err := fs.Load(context.Background())
		if err != nil || !ok {
			t.Fatalf("load: %v %v", ok, err)
		}
		return got
	}
	refused := func(t *testing.T, value string, err error, status int, field string) bool {
		t.Helper()
		if err == nil {
			return false
		}
		if utf8.ValidString(value) {
			t.Fatalf("%q is refused: %v", value, err)
		}
		wantField(t, err, status, field)
		return true
	}
	for _, tc := range cases {
		t.Run("user "+tc.name, func(t *testing.T) {
			next, _, err := PutUser(teamState(t), "web", tc.value, UserSpec{RPM: i64(3)})
			if refused(t, tc.value, err, 400, "user") {
				return
			}
			if !Build(&config.Config{}, roundTrip(t, next)).Team("web").UserOverride(tc.value) {
				t.Fatalf("the override of user %q is not that user's once stored", tc.value)
			}
		})
		t.Run("deployment "+tc.name, func(t *testing.T) {
			next, err := PutDeployment(baseState(), dep("d-"+tc.value, "a", "chat"), map[string]string{"sim": "simulated"})
			if refused(t, tc.value, err, 422, "deployment.id") {
				return
			}
			if roundTrip(t, next).indexOf("d-"+tc.value) < 0 {
				t.Fatalf("deployment %q is not found by its id once stored", "d-"+tc.value)
			}
		})
	}
}

// TestTeamNameDotSegments: "." and ".." are made of allowed characters but
// are no path segment a client keeps: a browser (the console) and curl
// resolve /admin/teams/../keys to /admin/keys, so such a team could be
// neither read, changed nor deleted by name. They are refused like any
// other name a URL cannot carry.
func TestTeamNameDotSegments(t *testing.T) {
	cases := []struct {
		name string
		ok   bool
	}{
		{".", false},
		{"..", false},
		{"...", true},
		{".web", true},
		{"web.", true},
		{"a..b", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := PutTeam(teamState(t), tc.name, TeamInput{Models: []string{"*"}}, aliases)
			if tc.ok {
				if err != nil {
					t.Fatalf("team %q refused: %v", tc.name, err)
				}
				return
			}
			wantField(t, err, 400, "name")
		})
	}
}
