package config

import (
	"fmt"
	"time"
)

// Cache configures the response cache (SPEC 18). It is off unless enabled
// here, on a model (models[].cache) or on a team (teams[].cache).
type Cache struct {
	// Enabled is the global switch; a model's or a team's own enabled wins
	// over it, one left unset inherits it. Default false.
	Enabled bool `koanf:"enabled"`
	// TTL is how long an entry is served after it was stored; a model's
	// cache.ttl replaces it. Default 1h.
	TTL time.Duration `koanf:"ttl"`
	// MaxEntryBytes is the largest encoded entry stored; a larger answer is
	// served but not stored. Default 1 MiB.
	MaxEntryBytes int64 `koanf:"max_entry_bytes"`
	// MaxLocalBytes bounds the node's in-process cache (the whole cache when
	// local-only, the node's copy when Redis is down), LRU by bytes.
	// Default 64 MiB.
	MaxLocalBytes int64 `koanf:"max_local_bytes"`
	// Coalesce lets identical requests in flight follow one upstream call.
	// Default true.
	Coalesce bool `koanf:"coalesce"`
	// CoalesceWait is the longest a follower waits for its leader before it
	// calls the upstream itself. Default 30s.
	CoalesceWait time.Duration `koanf:"coalesce_wait"`
}

// ModelCache is models[].cache (SPEC 18).
type ModelCache struct {
	// Enabled, when set, wins over cache.enabled for this model; nil inherits it.
	Enabled *bool `koanf:"enabled"`
	// TTL replaces cache.ttl for this model's entries; 0 inherits it.
	TTL time.Duration `koanf:"ttl"`
}

// TeamCache is teams[].cache (SPEC 18).
type TeamCache struct {
	// Enabled, when set, wins over cache.enabled for this team; nil inherits it.
	Enabled *bool `koanf:"enabled"`
}

// CacheEnabled reports whether requests of a team for a model are
// cacheable: the model and the team must both come out enabled, each by its
// own switch when set, else by the global one (SPEC 18).
func CacheEnabled(global Cache, model ModelCache, team TeamCache) bool {
	on := func(b *bool) bool {
		if b != nil {
			return *b
		}
		return global.Enabled
	}
	return on(model.Enabled) && on(team.Enabled)
}

// CacheTTL is the TTL of a model's entries: its own, else the global one.
func CacheTTL(global Cache, model ModelCache) time.Duration {
	if model.TTL > 0 {
		return model.TTL
	}
	return global.TTL
}

// validateCache checks the cache section and the models' and teams' cache
// settings (SPEC 13, 18).
func validateCache(c *Config) Problems {
	var p Problems
	add := func(format string, args ...any) { p = append(p, fmt.Sprintf(format, args...)) }
	cc := c.Cache
	if cc.TTL <= 0 {
		add("cache.ttl: must be a positive duration (default 1h), got %s", cc.TTL)
	}
	if cc.MaxEntryBytes < 1 {
		add("cache.max_entry_bytes: must be >= 1 (default 1048576), got %d", cc.MaxEntryBytes)
	}
	if cc.MaxLocalBytes < cc.MaxEntryBytes {
		add("cache.max_local_bytes: must be at least cache.max_entry_bytes (%d) so one entry fits (default 67108864), got %d", cc.MaxEntryBytes, cc.MaxLocalBytes)
	}
	if cc.CoalesceWait < 0 {
		add("cache.coalesce_wait: must not be negative (default 30s), got %s", cc.CoalesceWait)
	}
	for i, m := range c.Models {
		if m.Cache.TTL < 0 {
			add("models[%d].cache.ttl: must not be negative (0 = cache.ttl), got %s", i, m.Cache.TTL)
		}
	}
	return p
}
