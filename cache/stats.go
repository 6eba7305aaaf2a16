package cache

import (
	"math"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// The cluster-wide half of the admin (SPEC 18): what each node counts per
// team and model until it sends the counts to the shared store, and the
// purges it has heard of, so that an entry stored before a purge is never
// answered again whichever copy (Redis or the node's store) still holds it.

// Stat is the counters of one team and model, or their sum.
type Stat struct {
	Team  string `json:"team,omitempty"`
	Model string `json:"model,omitempty"`

	Hits      int64 `json:"hits"`
	Misses    int64 `json:"misses"`
	Coalesced int64 `json:"coalesced"`
	Bypasses  int64 `json:"bypasses"`
	// Entries and Bytes count what was stored (approximate: expiry is not
	// counted back; a purge resets them for its scope).
	Entries     int64   `json:"entries"`
	Bytes       int64   `json:"bytes"`
	SavedTokens int64   `json:"saved_tokens"`
	SavedUSD    float64 `json:"saved_usd"`
}

// Add adds o's counters to s.
func (s *Stat) Add(o *Stat) {
	s.Hits += o.Hits
	s.Misses += o.Misses
	s.Coalesced += o.Coalesced
	s.Bypasses += o.Bypasses
	s.Entries += o.Entries
	s.Bytes += o.Bytes
	s.SavedTokens += o.SavedTokens
	s.SavedUSD += o.SavedUSD
}

// HitRate is the share of lookups answered without an upstream call (hits
// and coalesced followers), 0 before any.
func (s *Stat) HitRate() float64 {
	served := s.Hits + s.Coalesced
	if n := served + s.Misses + s.Bypasses; n > 0 {
		return float64(served) / float64(n)
	}
	return 0
}

// Zero reports whether s counts nothing.
func (s *Stat) Zero() bool {
	return s.Hits == 0 && s.Misses == 0 && s.Coalesced == 0 && s.Bypasses == 0 && s.Entries == 0 && s.Bytes == 0 &&
		s.SavedTokens == 0 && s.SavedUSD == 0
}

// The results a request is counted under, as X-Switchyard-Cache spells them.
const (
	ResultHit       = "hit"
	ResultMiss      = "miss"
	ResultCoalesced = "coalesced"
	ResultBypass    = "bypass"
)

// Counters is a node's counts per team and model since it last sent them
// (Drain). Counting is lock-free once a team and model have been seen: the
// request path never waits on the sender.
type Counters struct {
	m sync.Map // scope -> *counter
}

type scope struct{ team, model string }

type counter struct {
	hits, misses, coalesced, bypasses atomic.Int64
	entries, bytes, tokens            atomic.Int64
	nanoUSD                           atomic.Int64 // saved USD in 1e-9 units: atomic without a float CAS loop
}

func (c *Counters) of(team, model string) *counter {
	k := scope{team, model}
	if v, ok := c.m.Load(k); ok {
		return v.(*counter)
	}
	v, _ := c.m.LoadOrStore(k, &counter{})
	return v.(*counter)
}

// Count counts one cacheable request of team for model under result; a hit
// or a coalesced answer also counts the tokens and USD it saved.
func (c *Counters) Count(team, model, result string, savedTokens int64, savedUSD float64) {
	k := c.of(team, model)
	switch result {
	case ResultHit:
		k.hits.Add(1)
	case ResultCoalesced:
		k.coalesced.Add(1)
	case ResultBypass:
		k.bypasses.Add(1)
	default:
		k.misses.Add(1)
	}
	if savedTokens > 0 {
		k.tokens.Add(savedTokens)
	}
	if savedUSD > 0 {
		k.nanoUSD.Add(int64(math.Round(savedUSD * 1e9)))
	}
}

// Stored counts one entry of size bytes stored for team and model.
func (c *Counters) Stored(team, model string, size int) {
	k := c.of(team, model)
	k.entries.Add(1)
	k.bytes.Add(int64(size))
}

// Drain returns the counts since the last Drain and zeroes them: what the
// node sends to the shared store. A count made while it runs lands in this
// drain or the next, never in neither.
func (c *Counters) Drain() []Stat {
	var out []Stat
	c.m.Range(func(key, v any) bool {
		k, n := key.(scope), v.(*counter)
		s := Stat{Team: k.team, Model: k.model,
			Hits: n.hits.Swap(0), Misses: n.misses.Swap(0), Coalesced: n.coalesced.Swap(0), Bypasses: n.bypasses.Swap(0),
			Entries: n.entries.Swap(0), Bytes: n.bytes.Swap(0), SavedTokens: n.tokens.Swap(0), SavedUSD: float64(n.nanoUSD.Swap(0)) / 1e9}
		if !s.Zero() {
			out = append(out, s)
		}
		return true
	})
	return out
}

// Undrain puts counts a failed send took back (Redis down: they go out
// with the next one).
func (c *Counters) Undrain(ss []Stat) {
	for i := range ss {
		s := &ss[i]
		k := c.of(s.Team, s.Model)
		k.hits.Add(s.Hits)
		k.misses.Add(s.Misses)
		k.coalesced.Add(s.Coalesced)
		k.bypasses.Add(s.Bypasses)
		k.entries.Add(s.Entries)
		k.bytes.Add(s.Bytes)
		k.tokens.Add(s.SavedTokens)
		k.nanoUSD.Add(int64(math.Round(s.SavedUSD * 1e9)))
	}
}

// Forget drops the scopes drop selects (a team the catalog no longer has).
func (c *Counters) Forget(drop func(team, model string) bool) {
	c.m.Range(func(key, _ any) bool {
		if k := key.(scope); drop(k.team, k.model) {
			c.m.Delete(key)
		}
		return true
	})
}

// Totals sums stats per team, per model and overall, each list sorted by
// name: what GET /admin/cache/stats answers.
func Totals(ss []Stat) (all Stat, teams, models []Stat) {
	byTeam, byModel := map[string]*Stat{}, map[string]*Stat{}
	for i := range ss {
		s := &ss[i]
		all.Add(s)
		for _, x := range [...]struct {
			m   map[string]*Stat
			key string
			mk  func() Stat
		}{{byTeam, s.Team, func() Stat { return Stat{Team: s.Team} }}, {byModel, s.Model, func() Stat { return Stat{Model: s.Model} }}} {
			t := x.m[x.key]
			if t == nil {
				v := x.mk()
				t = &v
				x.m[x.key] = t
			}
			t.Add(s)
		}
	}
	flat := func(m map[string]*Stat) []Stat {
		out := make([]Stat, 0, len(m))
		for _, s := range m {
			out = append(out, *s)
		}
		sort.Slice(out, func(i, j int) bool { return out[i].Team+"\x00"+out[i].Model < out[j].Team+"\x00"+out[j].Model })
		return out
	}
	return all, flat(byTeam), flat(byModel)
}

// Purges is the purges a node knows of: for every team (""), a team, or a
// team's model, the time of the latest one. An entry stored at or before
// the purge of its scope is purged, wherever a copy of it remains. Reads
// are lock-free (a snapshot swapped on the rare purge).
type Purges struct {
	mu  sync.Mutex                          // serializes writers
	cur atomic.Pointer[map[scope]time.Time] // nil until the first purge
}

// Record notes a purge of team ("" every team) and model ("" every model)
// at at; an older one than known changes nothing. It reports whether it
// was news.
func (p *Purges) Record(team, model string, at time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := scope{team, model}
	old := p.cur.Load()
	if old != nil && !(*old)[k].Before(at) {
		return false
	}
	next := make(map[scope]time.Time, 1)
	if old != nil {
		for kk, v := range *old {
			next[kk] = v
		}
	}
	next[k] = at
	p.cur.Store(&next)
	return true
}

// Purged reports whether an entry of team and model stored at storedAt has
// been purged since.
func (p *Purges) Purged(team, model string, storedAt time.Time) bool {
	m := p.cur.Load()
	if m == nil {
		return false
	}
	for _, k := range [...]scope{{"", ""}, {team, ""}, {team, model}} {
		if at, ok := (*m)[k]; ok && !storedAt.After(at) {
			return true
		}
	}
	return false
}

// Snapshot is the counts so far, without zeroing them.
func (c *Counters) Snapshot() []Stat {
	var out []Stat
	c.m.Range(func(key, v any) bool {
		k, n := key.(scope), v.(*counter)
		s := Stat{Team: k.team, Model: k.model,
			Hits: n.hits.Load(), Misses: n.misses.Load(), Coalesced: n.coalesced.Load(), Bypasses: n.bypasses.Load(),
			Entries: n.entries.Load(), Bytes: n.bytes.Load(), SavedTokens: n.tokens.Load(), SavedUSD: float64(n.nanoUSD.Load()) / 1e9}
		if !s.Zero() {
			out = append(out, s)
		}
		return true
	})
	return out
}

// ResetEntries zeroes the stored-entry counts of team ("" every team) and
// model ("" every model): what a purge removed.
func (c *Counters) ResetEntries(team, model string) {
	c.m.Range(func(key, v any) bool {
		if k := key.(scope); (team == "" || k.team == team) && (model == "" || k.model == model) {
			n := v.(*counter)
			n.entries.Store(0)
			n.bytes.Store(0)
		}
		return true
	})
}

// Teams calls fn with every team counted (once per model it has counts of).
func (c *Counters) Teams(fn func(team string)) {
	c.m.Range(func(key, _ any) bool {
		fn(key.(scope).team)
		return true
	})
}
