package cache

import (
	"testing"
	"time"

	"switchyard/config"
)

func TestPolicy(t *testing.T) {
	on, off := true, false
	c := &config.Config{
		Cache:  config.Cache{Enabled: false, TTL: time.Hour},
		Models: []config.Model{{Name: "a", Cache: config.ModelCache{Enabled: &on, TTL: time.Minute}}, {Name: "b", Cache: config.ModelCache{Enabled: &on}}, {Name: "c", Cache: config.ModelCache{Enabled: &off}}},
		Teams:  []config.Team{{Name: "yes", Cache: config.TeamCache{Enabled: &on}}, {Name: "inherit"}},
	}
	p := NewPolicy(c)
	cases := []struct {
		team   string
		models []string
		want   bool
	}{
		{"yes", []string{"a"}, true},
		{"yes", []string{"a", "b"}, true},
		{"yes", []string{"a", "c"}, false},
		{"yes", []string{"unconfigured"}, false}, // inherits the global off
		{"inherit", []string{"a"}, false},
		{"unknown", []string{"a"}, false},
		{"yes", nil, false},
	}
	for _, tc := range cases {
		if got := p.Enabled(tc.team, tc.models...); got != tc.want {
			t.Errorf("%s %v: got %v", tc.team, tc.models, got)
		}
	}
	if p.TTL("a", "b") != time.Minute || p.TTL("b") != time.Hour {
		t.Error("ttl")
	}
	// only the team with a setting of its own is indexed; "inherit" reads
	// the same without an entry (the cases above)
	if len(p.teams) != 1 {
		t.Errorf("teams indexed: %d, want 1 (only those with a cache setting)", len(p.teams))
	}
}
