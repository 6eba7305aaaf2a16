package shared

import (
	"path"
	"strings"
	"testing"
)

// The MATCH patterns select a scope's entries and nothing else, whatever
// the team and model names hold (SCAN's glob is path.Match's, near enough
// for these characters).
func TestPurgePatterns(t *testing.T) {
	s := &Store{prefix: "p*:"}
	hex := strings.Repeat("a", 64)
	key := func(team, model string) string { return "p*:{team:" + team + "}:rc:" + model + ":" + hex }
	for _, c := range []struct {
		team, model string
		match       []string
		miss        []string
	}{
		{"t", "m", []string{key("t", "m")}, []string{key("t", "m:x"), key("t", "n"), key("u", "m"), "p*:{team:t}:pt:x"}},
		{"t?", "m[1]", []string{key("t?", "m[1]")}, []string{key("tx", "m[1]"), key("t?", "m1")}},
		{"t", "", []string{key("t", "m"), key("t", "m:x")}, []string{key("u", "m"), "p*:{team:t}:pd:x"}},
		{"", "", []string{key("t", "m"), key("u", "n")}, []string{"p*:{team:t}:tat", "px:{team:t}:rc:m:" + hex}},
	} {
		pat := s.pattern(c.team, c.model)
		for _, k := range c.match {
			if ok, err := path.Match(pat, k); !ok || err != nil {
				t.Errorf("%q should match %q (%v)", pat, k, err)
			}
		}
		for _, k := range c.miss {
			if ok, _ := path.Match(pat, k); ok {
				t.Errorf("%q should not match %q", pat, k)
			}
		}
	}
}
