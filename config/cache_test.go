package config

import (
	"strings"
	"testing"
	"time"
)

func TestCacheDefaults(t *testing.T) {
	c, err := Load([]byte(minimal), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := Cache{Enabled: false, TTL: time.Hour, MaxEntryBytes: 1 << 20, MaxLocalBytes: 64 << 20, Coalesce: true, CoalesceWait: 30 * time.Second}
	if c.Cache != want {
		t.Fatalf("got %+v, want %+v", c.Cache, want)
	}
	if c.Models != nil && c.Models[0].Cache.Enabled != nil || c.Teams[0].Cache.Enabled != nil {
		t.Fatal("a model's or team's enabled must stay unset")
	}
}

func TestCacheLoad(t *testing.T) {
	yml := minimal + `
models:
  - {name: m, cache: {enabled: true, ttl: 10m}}
cache: {ttl: 2h, coalesce: false}
`
	yml = strings.Replace(yml, `models: ["*"]}`, `models: ["*"], cache: {enabled: false}}`, 1)
	c, err := Load([]byte(yml), []string{"SWITCHYARD_CACHE_ENABLED=true"})
	if err != nil {
		t.Fatal(err)
	}
	if !c.Cache.Enabled || c.Cache.TTL != 2*time.Hour || c.Cache.Coalesce {
		t.Fatalf("cache %+v", c.Cache)
	}
	m, tm := c.Models[0].Cache, c.Teams[0].Cache
	if m.Enabled == nil || !*m.Enabled || m.TTL != 10*time.Minute || tm.Enabled == nil || *tm.Enabled {
		t.Fatalf("model %+v team %+v", m, tm)
	}
	if CacheEnabled(c.Cache, m, tm) {
		t.Fatal("the team switched the cache off")
	}
	if CacheTTL(c.Cache, m) != 10*time.Minute || CacheTTL(c.Cache, ModelCache{}) != 2*time.Hour {
		t.Fatal("ttl")
	}
}

func TestCacheEnabled(t *testing.T) {
	on, off := true, false
	cases := []struct {
		global      bool
		model, team *bool
		want        bool
	}{
		{false, nil, nil, false},
		{true, nil, nil, true},
		{false, &on, nil, false}, // the team inherits the global off
		{false, &on, &on, true},
		{true, &off, nil, false},
		{true, nil, &off, false},
		{false, nil, &on, false},
		{true, &on, &on, true},
	}
	for _, c := range cases {
		if got := CacheEnabled(Cache{Enabled: c.global}, ModelCache{Enabled: c.model}, TeamCache{Enabled: c.team}); got != c.want {
			t.Errorf("global %v model %v team %v: got %v", c.global, c.model, c.team, got)
		}
	}
}

func TestCacheValidate(t *testing.T) {
	yml := minimal + `
models:
  - {name: m, cache: {ttl: -1s}}
cache: {ttl: 0s, max_entry_bytes: 0, max_local_bytes: -1, coalesce_wait: -1s}
`
	_, err := Load([]byte(yml), nil)
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{"cache.ttl:", "cache.max_entry_bytes:", "cache.max_local_bytes:", "cache.coalesce_wait:", "models[0].cache.ttl:"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("no problem names %s in:\n%v", want, err)
		}
	}
	_, err = Load([]byte(minimal+"\ncache: {max_entry_bytes: 2048, max_local_bytes: 1024}\n"), nil)
	if err == nil || !strings.Contains(err.Error(), "cache.max_local_bytes: must be at least cache.max_entry_bytes") {
		t.Fatalf("got %v", err)
	}
	_, err = Load([]byte(minimal+"\ncache: {enabeld: true}\n"), nil)
	if err == nil || !strings.Contains(err.Error(), "cache.enabeld: unknown key") {
		t.Fatalf("got %v", err)
	}
}
