package cache

import (
	"strconv"
	"strings"
	"time"
)

// Directives are a request's Cache-Control directives (RFC 9111) as SPEC 18
// reads them; other directives are ignored.
type Directives struct {
	NoStore      bool          // neither read nor store
	NoCache      bool          // do not answer from the cache; store the fresh answer
	OnlyIfCached bool          // a miss is answered 504 cache_miss, no upstream call
	MaxAge       time.Duration // accept only an entry at most this old; valid when HasMaxAge
	HasMaxAge    bool
}

// ParseDirectives reads the Cache-Control header values of a request.
// Directive names are case-insensitive; a malformed max-age is ignored.
func ParseDirectives(values []string) Directives {
	var d Directives
	for _, v := range values {
		for _, tok := range strings.Split(v, ",") {
			name, arg, _ := strings.Cut(strings.TrimSpace(tok), "=")
			switch strings.ToLower(strings.TrimSpace(name)) {
			case "no-store":
				d.NoStore = true
			case "no-cache":
				d.NoCache = true
			case "only-if-cached":
				d.OnlyIfCached = true
			case "max-age":
				n, err := strconv.ParseInt(strings.Trim(strings.TrimSpace(arg), `"`), 10, 64)
				if err != nil || n < 0 {
					continue
				}
				age := time.Duration(min(n, int64(1<<62)/int64(time.Second))) * time.Second
				if !d.HasMaxAge || age < d.MaxAge { // RFC 9111: the most restrictive wins
					d.MaxAge, d.HasMaxAge = age, true
				}
			}
		}
	}
	return d
}

// Read reports whether the cache may answer the request (and whether it
// may follow another request's upstream call).
func (d Directives) Read() bool { return !d.NoStore && !d.NoCache }

// Store reports whether the answer may be stored.
func (d Directives) Store() bool { return !d.NoStore }

// Fresh reports whether an entry of the given age may answer.
func (d Directives) Fresh(age time.Duration) bool { return !d.HasMaxAge || age <= d.MaxAge }

// Result is the X-Switchyard-Cache header value of a cacheable request
// that was not a hit: "bypass" for no-store, else "miss".
func (d Directives) Result() string {
	if d.NoStore {
		return "bypass"
	}
	return "miss"
}
