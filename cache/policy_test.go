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
	}
	p := NewPolicy(c)
	yes, no, inherit := config.TeamCache{Enabled: &on}, config.TeamCache{Enabled: &off}, config.TeamCache{}
	cases := []struct {
		name   string
		team   config.TeamCache
		models []string
		want   bool
	}{
		{"yes", yes, []string{"a"}, true},
		{"yes", yes, []string{"a", "b"}, true},
		{"yes", yes, []string{"a", "c"}, false},
		{"yes", yes, []string{"unconfigured"}, false}, // inherits the global off
		{"inherit", inherit, []string{"a"}, false},
		{"no", no, []string{"a"}, false},
		{"yes", yes, nil, false},
	}
	for _, tc := range cases {
		if got := p.Enabled(tc.team, tc.models...); got != tc.want {
			t.Errorf("%s %v: got %v", tc.name, tc.models, got)
		}
	}
	if p.TTL("a", "b") != time.Minute || p.TTL("b") != time.Hour {
		t.Error("ttl")
	}
}
