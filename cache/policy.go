package cache

import (
	"time"

	"switchyard/config"
)

// Policy resolves SPEC 18's switches and TTLs for a request: built once
// per configuration, immutable after NewPolicy, so the hot path reads a
// map and takes no lock. A team's own switch is not here: it lives in the
// catalog with the team (PUT /admin/teams/{name} changes it live), and the
// caller passes the request's.
type Policy struct {
	global config.Cache
	models map[string]config.ModelCache
}

// NewPolicy indexes the cache settings of c's models.
func NewPolicy(c *config.Config) *Policy {
	p := &Policy{global: c.Cache, models: make(map[string]config.ModelCache, len(c.Models))}
	for _, m := range c.Models {
		p.models[m.Name] = m.Cache
	}
	return p
}

// Global is the cache section.
func (p *Policy) Global() config.Cache { return p.global }

// Enabled reports whether the requests for models of a team whose own
// switch is tc are cacheable: the team and every model must come out
// enabled (config.CacheEnabled). A tier alias passes both its targets,
// since the tier is known only in the Begin script and either may serve.
func (p *Policy) Enabled(tc config.TeamCache, models ...string) bool {
	for _, m := range models {
		if !config.CacheEnabled(p.global, p.models[m], tc) {
			return false
		}
	}
	return len(models) > 0
}

// TTL is the entry TTL for models: the shortest of their TTLs.
func (p *Policy) TTL(models ...string) time.Duration {
	var ttl time.Duration
	for i, m := range models {
		t := config.CacheTTL(p.global, p.models[m])
		if i == 0 || t < ttl {
			ttl = t
		}
	}
	return ttl
}

// MaxTTL is the longest TTL an entry can have under this configuration:
// how long a purge's record must outlive the entries it purged.
func (p *Policy) MaxTTL() time.Duration {
	ttl := config.CacheTTL(p.global, config.ModelCache{})
	for _, m := range p.models {
		ttl = max(ttl, config.CacheTTL(p.global, m))
	}
	return ttl
}
