package edge

// Usage by level (SPEC 3.1): spend and tokens per (team, key, end user,
// public model, UTC day), kept cluster-wide for 90 days and exact through a
// Redis outage. Finish turns an Outcome into one row's sums; the Redis
// state folds them into the team's pending rows (teamState.levels), which
// the writer sends with the team's other writes (finishLua, usage section);
// every node also keeps its own bounded copy (Book), which answers when
// there is no Redis (edge.Local) or Redis does not answer.
//
// Redis layout: one hash per team and UTC day, under the team's hash tag,
//
//	<prefix>{team:<name>}:usage:<YYYY-MM-DD>   field <model>|<key id>|<user>|<metric>
//
// with <metric> one of req, in, cin, out, usd, creq, saved (usageMetrics)
// and the three names escaped (escapeField: '%' and '|' percent-encoded),
// so a user id holding '|' cannot make one row read as another. The hash
// expires 91 days after its day began (EXPIREAT, set on every write, so the
// TTL needs no bookkeeping): a day stays readable while it is within 90
// days of today.

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// UsageSums are the sums of one usage row (SPEC 3.1). A request an
// upstream served counts in Requests, the token fields and CostUSD; an
// answer from the response cache (SPEC 18) counts only in CachedRequests and
// SavedUSD (what the upstream call would have cost): it is not spend.
type UsageSums struct {
	Requests       int64   `json:"requests"`
	InputTokens    int64   `json:"input_tokens"`  // prompt tokens charged, cached ones included
	CachedTokens   int64   `json:"cached_tokens"` // part of InputTokens read from the upstream's prompt cache
	OutputTokens   int64   `json:"output_tokens"`
	CostUSD        float64 `json:"cost_usd"`
	CachedRequests int64   `json:"cached_requests"`
	SavedUSD       float64 `json:"saved_usd"`
}

// Add adds o to s.
func (s *UsageSums) Add(o *UsageSums) {
	s.Requests += o.Requests
	s.InputTokens += o.InputTokens
	s.CachedTokens += o.CachedTokens
	s.OutputTokens += o.OutputTokens
	s.CostUSD += o.CostUSD
	s.CachedRequests += o.CachedRequests
	s.SavedUSD += o.SavedUSD
}

// UsageRow is one stored row: a team's sums for one (day, model, key, user).
type UsageRow struct {
	Team  string // the team
	Day   string // UTC day, YYYY-MM-DD
	Model string // public model
	Key   string // key id ("" = unknown)
	User  string // end user ("" = none named; OtherUser = folded)
	UsageSums
}

// UsageQuery selects rows: the teams to read and the days (UTC, both
// included); Model, Key (an id) and User, when not empty, keep only
// matching rows.
type UsageQuery struct {
	Teams    []string
	From, To time.Time
	Model    string
	Key      string
	User     string
}

// UsageReport is what UsageRows read.
type UsageReport struct {
	Rows []UsageRow
	// Shared is true when the rows are the cluster's (read in Redis), false
	// when they are this node's own (no Redis, or Redis unreachable).
	Shared bool
	// Folded is how many of this node's requests since it started had their
	// user (and, past twice the bound, their key) folded into OtherUser
	// because a team had too many distinct rows: in the writer's pending
	// rows when Shared, in the node's own rows when not (SPEC 9).
	Folded int64
}

// OtherUser is the user (and key) name rows are folded into past the bound.
const OtherUser = "(other)"

// Bounds of what a node holds (SPEC 9, 16: a hostile client sending a
// million distinct user ids must not grow a node's memory).
const (
	// UsageRetention is how long rows are kept: the API reads at most this
	// far back.
	UsageRetention = 90 * 24 * time.Hour
	// maxTeamRows is the distinct rows one team may hold (pending in the
	// writer, or in the node's book) before a new row's user is folded into
	// OtherUser; at twice that its key is folded too. The last fold,
	// (day, model, OtherUser, OtherUser), is bounded by the catalog's models.
	maxTeamRows = 4096
	// maxNodeRows bounds the rows of all teams together, in the writer and
	// in the book apart: past it every new row is folded at once.
	maxNodeRows = 200_000
	// pressureRows is the rows pending for one team past which they go out
	// at once instead of after usageEvery: holding rows pays when they
	// repeat (a team's few keys and users); a team serving many distinct
	// ones (100,000 end users, SPEC 16) gains nothing by the wait, and
	// held, its rows reached maxTeamRows within a second and were folded.
	pressureRows = maxTeamRows / 2
)

// rowPressure reports whether the team holds so many distinct usage rows
// that they go out now (pressureRows; ts.mu held).
func (ts *teamState) rowPressure() bool { return len(ts.byLevel) >= pressureRows }

const usageDays = int32(UsageRetention / (24 * time.Hour))

// rowKey names a row within its team.
type rowKey struct {
	day              int32 // days since 1970-01-01 UTC
	model, key, user string
}

func dayOf(t time.Time) int32 { return int32(t.Unix() / 86400) }

func dayString(d int32) string { return time.Unix(int64(d)*86400, 0).UTC().Format(time.DateOnly) }

// dayExpireAt is when day d's hash expires (unix s): 91 days after it began.
func dayExpireAt(d int32) int64 { return int64(d+usageDays+1) * 86400 }

// rowOf is o's row and sums, at now; ok is false for a request that was
// neither served nor answered from the cache (it used nothing).
func rowOf(o *Outcome, now time.Time) (k rowKey, s UsageSums, ok bool) {
	switch {
	case o.Cached:
		s = UsageSums{CachedRequests: 1, SavedUSD: o.SavedUSD}
	case o.Served && o.Deployment != "":
		s = UsageSums{Requests: 1, InputTokens: int64(o.PromptTokens), CachedTokens: int64(o.CachedTokens),
			OutputTokens: int64(o.CompletionTokens), CostUSD: o.CostUSD}
	default:
		return k, s, false
	}
	return rowKey{day: dayOf(now), model: o.Model, key: o.KeyID, user: o.User}, s, true
}

// rowSet are one team's rows.
type rowSet map[rowKey]*UsageSums

// add folds s into row k. A new row is made while the map holds fewer than
// maxTeamRows rows and full is false; past that its user becomes
// OtherUser, and past twice that (or when full) its key too. It returns
// how many rows it made (0 or 1) and whether it folded.
func (m rowSet) add(k rowKey, s *UsageSums, full bool) (made int, folded bool) {
	return m.addBeside(k, s, full, 0)
}

// addBeside is add for a set that extra rows held elsewhere count toward.
func (m rowSet) addBeside(k rowKey, s *UsageSums, full bool, extra int) (made int, folded bool) {
	if r := m[k]; r != nil {
		r.Add(s)
		return 0, false
	}
	if full || len(m)+extra >= maxTeamRows {
		folded = true
		k.user = OtherUser
		if r := m[k]; r != nil {
			r.Add(s)
			return 0, true
		}
		if full || len(m)+extra >= 2*maxTeamRows {
			k.key = OtherUser
			if r := m[k]; r != nil {
				r.Add(s)
				return 0, true
			}
		}
	}
	c := *s
	m[k] = &c
	return 1, folded
}

// match reports whether row k is selected by q's day range [from, to] and
// filters.
func (q *UsageQuery) match(k rowKey, from, to int32) bool {
	return k.day >= from && k.day <= to && (q.Model == "" || q.Model == k.model) &&
		(q.Key == "" || q.Key == k.key) && (q.User == "" || q.User == k.user)
}

// Book is a node's own record of the usage rows it served, bounded
// (maxTeamRows per team, maxNodeRows in all) and kept UsageRetention. It is
// the store of a local-only node and the answer of a Redis node while Redis
// is unreachable. Safe for concurrent use; Add takes its team's lock only.
type Book struct {
	teams  sync.Map // team name -> *bookTeam
	rows   atomic.Int64
	folded atomic.Int64
}

type bookTeam struct {
	mu     sync.Mutex
	rows   rowSet // guarded by mu
	pruned int32  // guarded by mu: the last day rows were pruned on
}

// NewBook returns an empty book.
func NewBook() *Book { return &Book{} }

// add records one row of team; it returns whether the row was folded.
func (b *Book) add(team string, k rowKey, s *UsageSums) bool {
	v, ok := b.teams.Load(team)
	if !ok {
		v, _ = b.teams.LoadOrStore(team, &bookTeam{rows: rowSet{}})
	}
	bt := v.(*bookTeam)
	bt.mu.Lock()
	if k.day > bt.pruned { // once a day: drop what is past the retention
		for old := range bt.rows {
			if old.day <= k.day-usageDays-1 {
				delete(bt.rows, old)
				b.rows.Add(-1)
			}
		}
		bt.pruned = k.day
	}
	made, folded := bt.rows.add(k, s, b.rows.Load() >= maxNodeRows)
	bt.mu.Unlock()
	b.rows.Add(int64(made))
	if folded {
		b.folded.Add(1)
	}
	return folded
}

// teamNames calls fn with every team the book holds rows of.
func (b *Book) teamNames(fn func(team string)) {
	b.teams.Range(func(k, _ any) bool {
		fn(k.(string))
		return true
	})
}

// forget drops team's rows.
func (b *Book) forget(team string) {
	if v, ok := b.teams.LoadAndDelete(team); ok {
		bt := v.(*bookTeam)
		bt.mu.Lock()
		b.rows.Add(-int64(len(bt.rows)))
		bt.rows = rowSet{}
		bt.mu.Unlock()
	}
}

// Rows returns the rows q selects, in no particular order.
func (b *Book) Rows(q *UsageQuery) []UsageRow {
	from, to := dayOf(q.From), dayOf(q.To)
	var out []UsageRow
	for _, team := range q.Teams {
		v, ok := b.teams.Load(team)
		if !ok {
			continue
		}
		bt := v.(*bookTeam)
		bt.mu.Lock()
		for k, s := range bt.rows {
			if q.match(k, from, to) {
				out = append(out, UsageRow{Team: team, Day: dayString(k.day), Model: k.model, Key: k.key, User: k.user, UsageSums: *s})
			}
		}
		bt.mu.Unlock()
	}
	return out
}

// Folded is how many rows the book folded since it was made.
func (b *Book) Folded() int64 { return b.folded.Load() }

// UsageRows implements State: the node's own book (it has no other).
func (l *Local) UsageRows(_ context.Context, q UsageQuery) (UsageReport, error) {
	return UsageReport{Rows: l.book.Rows(&q), Folded: l.book.Folded()}, nil
}

// usageMetrics are the metric suffixes of a row's hash fields, in
// UsageSums order.
var usageMetrics = [7]string{"req", "in", "cin", "out", "usd", "creq", "saved"}

var (
	fieldEscaper   = strings.NewReplacer("%", "%25", "|", "%7C")
	fieldUnescaper = strings.NewReplacer("%7C", "|", "%25", "%")
)

// escapeField makes a name safe between the '|' of a hash field.
func escapeField(s string) string { return fieldEscaper.Replace(s) }

// rowField is the part of a row's hash fields before the metric:
// "<model>|<key>|<user>|", each name escaped.
func rowField(k rowKey) string {
	return escapeField(k.model) + "|" + escapeField(k.key) + "|" + escapeField(k.user) + "|"
}

// parseField splits a hash field into its row and metric index; ok is
// false for a field this code did not write.
func parseField(f string) (model, key, user string, metric int, ok bool) {
	p := strings.Split(f, "|")
	if len(p) != 4 {
		return "", "", "", 0, false
	}
	metric = -1
	for i, m := range usageMetrics {
		if m == p[3] {
			metric = i
		}
	}
	if metric < 0 {
		return "", "", "", 0, false
	}
	return fieldUnescaper.Replace(p[0]), fieldUnescaper.Replace(p[1]), fieldUnescaper.Replace(p[2]), metric, true
}

// set stores metric i's value v in s.
func (s *UsageSums) set(i int, v float64) {
	switch i {
	case 0:
		s.Requests = int64(v)
	case 1:
		s.InputTokens = int64(v)
	case 2:
		s.CachedTokens = int64(v)
	case 3:
		s.OutputTokens = int64(v)
	case 4:
		s.CostUSD = v
	case 5:
		s.CachedRequests = int64(v)
	case 6:
		s.SavedUSD = v
	}
}
