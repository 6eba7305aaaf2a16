package cache

import (
	"testing"
	"time"
)

func TestParseDirectives(t *testing.T) {
	cases := []struct {
		in          []string
		want        Directives
		read, store bool
		result      string
	}{
		{nil, Directives{}, true, true, "miss"},
		{[]string{"no-store"}, Directives{NoStore: true}, false, false, "bypass"},
		{[]string{"No-Cache"}, Directives{NoCache: true}, false, true, "miss"},
		{[]string{"max-age=60"}, Directives{MaxAge: time.Minute, HasMaxAge: true}, true, true, "miss"},
		{[]string{`max-age="5", only-if-cached`}, Directives{MaxAge: 5 * time.Second, HasMaxAge: true, OnlyIfCached: true}, true, true, "miss"},
		{[]string{"max-age=60", "max-age=10"}, Directives{MaxAge: 10 * time.Second, HasMaxAge: true}, true, true, "miss"},
		{[]string{"max-age=0"}, Directives{HasMaxAge: true}, true, true, "miss"},
		{[]string{"max-age=-1, max-age=x, private, no-transform"}, Directives{}, true, true, "miss"},
		{[]string{" no-store ,no-cache"}, Directives{NoStore: true, NoCache: true}, false, false, "bypass"},
		{[]string{"max-age=99999999999999999999"}, Directives{}, true, true, "miss"},
	}
	for _, c := range cases {
		d := ParseDirectives(c.in)
		if d != c.want || d.Read() != c.read || d.Store() != c.store || d.Result() != c.result {
			t.Errorf("%q: got %+v read %v store %v %s", c.in, d, d.Read(), d.Store(), d.Result())
		}
	}
	d := ParseDirectives([]string{"max-age=10"})
	if !d.Fresh(10*time.Second) || d.Fresh(11*time.Second) || !(Directives{}).Fresh(time.Hour) {
		t.Error("Fresh")
	}
}
