package gateway

import (
	"cmp"
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"switchyard/catalog"
	"switchyard/edge"
)

// GET /admin/usage: usage by level (SPEC 3.1), read from the edge state
// (the cluster's rows in Redis, or this node's own), filtered and grouped
// here.

// Bounds of GET /admin/usage.
const (
	usageDefaultDays = 30    // from defaults to 29 days before to (30 days in all)
	usageMaxRows     = 10000 // rows answered; the rest are cut (truncated: true), the smallest spend first
)

// usageGroups are the group_by fields; team is an addition to SPEC 3.1's
// four, for the all-teams view.
var usageGroups = []string{"day", "model", "key", "user", "team"}

// usageQuery is a parsed GET /admin/usage.
type usageQuery struct {
	edge.UsageQuery
	groups []string
}

// handleUsage is GET /admin/usage?team=&key=&user=&model=&from=&to=&group_by=.
// It answers rows of requests, input_tokens, cached_tokens, output_tokens,
// cost_usd, cached_requests and saved_usd with their group fields, and the
// totals. "shared" says whether they are the cluster's (Redis answered) or
// this node's own. Rows the node's writer has not sent to Redis yet (at
// most one usage flush, 10s) are not counted, as in the team usage.
func (s *Server) handleUsage(c *gin.Context) {
	snap := s.Catalog.Load()
	q, e := parseUsageQuery(c, snap, time.Now().UTC())
	if e != nil {
		writeError(c, e)
		return
	}
	// the same ask within usageFresh shares one read (group_by is applied
	// here, after it)
	read := strings.Join([]string{c.Query("team"), q.From.Format(time.DateOnly), q.To.Format(time.DateOnly), q.Model, q.Key, q.User}, "\x00")
	rep, err := s.usageReads.get(c.Request.Context(), read, func(ctx context.Context) (edge.UsageReport, error) {
		return s.Edge.UsageRows(ctx, q.UsageQuery)
	})
	if err != nil {
		writeError(c, &apiError{Status: http.StatusServiceUnavailable, Type: "unavailable", Message: "usage unavailable: " + err.Error()})
		return
	}
	rows, total := groupUsage(rep.Rows, q.groups)
	truncated := len(rows) > usageMaxRows
	if truncated {
		slices.SortStableFunc(rows, func(a, b usageOut) int { return cmp.Compare(b.CostUSD+b.SavedUSD, a.CostUSD+a.SavedUSD) })
		rows = rows[:usageMaxRows]
		sortUsage(rows, q.groups)
	}
	var names map[string]string
	if slices.Contains(q.groups, "key") {
		names = keyNames(snap, rows, slices.Index(q.groups, "key"))
	}
	out := make([]usageRowOut, len(rows))
	for j := range rows {
		r, o := &rows[j], &out[j]
		o.Requests, o.InputTokens, o.CachedTokens, o.OutputTokens = r.Requests, r.InputTokens, r.CachedTokens, r.OutputTokens
		o.CostUSD, o.CachedRequests, o.SavedUSD = r.CostUSD, r.CachedRequests, r.SavedUSD
		for i, g := range q.groups {
			v := &r.group[i]
			switch g {
			case "day":
				o.Day = v
			case "model":
				o.Model = v
			case "key":
				name := names[*v]
				o.Key, o.KeyName = v, &name
			case "user":
				o.User = v
			case "team":
				o.Team = v
			}
		}
	}
	c.JSON(http.StatusOK, gin.H{
		"from": q.From.Format(time.DateOnly), "to": q.To.Format(time.DateOnly), "group_by": q.groups,
		"team": c.Query("team"), "shared": rep.Shared, "node": s.Config.Server.NodeID, "folded": rep.Folded,
		"rows": out, "totals": total, "truncated": truncated,
	})
}

// usageRowOut is one row of GET /admin/usage: its sums and the fields it
// is grouped by (a field it is not grouped by is absent). Its fields are in
// the order of their names, so a row encodes to the bytes a map of them
// did (encoding/json sorts a map's keys; TestUsageRowOutBytes): a struct,
// not a map of nine boxed values, for each of the up to 10,000 rows.
type usageRowOut struct {
	CachedRequests int64   `json:"cached_requests"`
	CachedTokens   int64   `json:"cached_tokens"`
	CostUSD        float64 `json:"cost_usd"`
	Day            *string `json:"day,omitempty"`
	InputTokens    int64   `json:"input_tokens"`
	Key            *string `json:"key,omitempty"`
	KeyName        *string `json:"key_name,omitempty"`
	Model          *string `json:"model,omitempty"`
	OutputTokens   int64   `json:"output_tokens"`
	Requests       int64   `json:"requests"`
	SavedUSD       float64 `json:"saved_usd"`
	Team           *string `json:"team,omitempty"`
	User           *string `json:"user,omitempty"`
}

// parseUsageQuery reads and checks the parameters; every error names its
// parameter and the fix (400).
func parseUsageQuery(c *gin.Context, snap *catalog.Snapshot, now time.Time) (*usageQuery, *apiError) {
	q := &usageQuery{}
	today := now.Truncate(24 * time.Hour)
	q.To, q.From = today, today.AddDate(0, 0, -(usageDefaultDays-1))
	var err *apiError
	if v := c.Query("to"); v != "" {
		if q.To, err = usageDate("to", v); err != nil {
			return nil, err
		}
		if q.To.After(today) {
			q.To = today
		}
		if c.Query("from") == "" {
			q.From = q.To.AddDate(0, 0, -(usageDefaultDays - 1))
		}
	}
	if v := c.Query("from"); v != "" {
		if q.From, err = usageDate("from", v); err != nil {
			return nil, err
		}
	}
	oldest := today.Add(-edge.UsageRetention)
	if q.To.Before(oldest) {
		return nil, errBadRequest("to", "to: usage is kept 90 days; send a date on or after "+oldest.Format(time.DateOnly))
	}
	if q.From.Before(oldest) {
		if c.Query("from") != "" {
			return nil, errBadRequest("from", "from: usage is kept 90 days; send a date on or after "+oldest.Format(time.DateOnly))
		}
		q.From = oldest
	}
	if q.From.After(q.To) {
		return nil, errBadRequest("from", "from: "+q.From.Format(time.DateOnly)+" is after to ("+q.To.Format(time.DateOnly)+"); send from <= to")
	}
	q.groups = []string{"day"}
	if v := c.Query("group_by"); v != "" {
		q.groups = strings.Split(v, ",")
		if len(q.groups) > 2 {
			return nil, errBadRequest("group_by", "group_by: at most two fields, comma-separated (e.g. day,model), got \""+v+"\"")
		}
		for _, g := range q.groups {
			if !slices.Contains(usageGroups, g) {
				return nil, errBadRequest("group_by", "group_by: \""+g+"\" is not one of day, model, key, user, team")
			}
		}
		if len(q.groups) == 2 && q.groups[0] == q.groups[1] {
			return nil, errBadRequest("group_by", "group_by: \""+v+"\" names one field twice; name two different fields")
		}
	}
	q.Model, q.User = c.Query("model"), c.Query("user")
	if team := c.Query("team"); team != "" {
		if snap.Team(team) == nil {
			return nil, errBadRequest("team", "team: no team named \""+team+"\"; GET /admin/teams lists them")
		}
		q.Teams = []string{team}
	} else {
		for _, t := range snap.Teams {
			q.Teams = append(q.Teams, t.Name)
		}
	}
	if key := c.Query("key"); key != "" {
		id, team, e := resolveKey(snap, q.Teams, key)
		if e != nil {
			return nil, e
		}
		q.Key = id
		if team != "" {
			q.Teams = []string{team}
		}
	}
	return q, nil
}

// usageDate reads a date of the query: YYYY-MM-DD (RFC 3339 full-date), or
// a full RFC 3339 time, whose UTC day is taken.
func usageDate(param, v string) (time.Time, *apiError) {
	if t, err := time.Parse(time.DateOnly, v); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t.UTC().Truncate(24 * time.Hour), nil
	}
	return time.Time{}, errBadRequest(param, param+": \""+v+"\" is not a date; send YYYY-MM-DD (UTC), e.g. "+time.Now().UTC().Format(time.DateOnly))
}

// resolveKey finds the key named by id or by name among teams' keys and
// returns its id and team. A name several teams' keys share is refused
// (name the team, or send the id). An id the catalog no longer has (a
// revoked key: its usage stays readable) is taken as it is when it has
// the form of an id.
func resolveKey(snap *catalog.Snapshot, teams []string, key string) (id, team string, e *apiError) {
	if snap.State == nil {
		return key, "", nil
	}
	in := map[string]bool{}
	for _, t := range teams {
		in[t] = true
	}
	var found, ids []string // team and id of each match
	for _, t := range snap.State.Teams {
		if !in[t.Name] {
			continue
		}
		for _, k := range t.Keys {
			if k.ID == key {
				return k.ID, t.Name, nil
			}
			if k.Name == key {
				found, ids = append(found, t.Name), append(ids, k.ID)
			}
		}
	}
	switch {
	case len(found) == 1:
		return ids[0], found[0], nil
	case len(found) > 1:
		// key names are not unique within a team either (a key rotated
		// under its name): team= helps only when no team has two
		which := make([]string, len(ids))
		for i := range ids {
			which[i] = ids[i] + " of team " + found[i]
		}
		fix := "send the key's id"
		if len(slices.Compact(slices.Clone(found))) == len(found) {
			fix = "add team= or send the key's id"
		}
		return "", "", errBadRequest("key", "key: the name \""+key+"\" names "+strconv.Itoa(len(ids))+" keys ("+strings.Join(which, ", ")+"); "+fix)
	case strings.HasPrefix(key, "key_") || strings.HasPrefix(key, "cfg_"):
		return key, "", nil
	}
	return "", "", errBadRequest("key", "key: no key has the id or name \""+key+"\"; GET /admin/teams/{team}/keys lists them")
}

// keyNames maps the key ids of the answered rows (group g) to their names:
// a catalog may hold 100,000 keys, an answer at most usageMaxRows.
func keyNames(snap *catalog.Snapshot, rows []usageOut, g int) map[string]string {
	m := make(map[string]string, len(rows))
	for _, r := range rows {
		m[r.group[g]] = ""
	}
	if snap.State == nil {
		return m
	}
	for _, t := range snap.State.Teams {
		for _, k := range t.Keys {
			if _, ok := m[k.ID]; ok {
				m[k.ID] = k.Name
			}
		}
	}
	return m
}

// usageOut is one answered row: its group values and sums.
type usageOut struct {
	group [2]string
	edge.UsageSums
}

// groupUsage sums rows by groups and returns them sorted (sortUsage), with
// the totals of all of them.
func groupUsage(rows []edge.UsageRow, groups []string) ([]usageOut, edge.UsageSums) {
	var total edge.UsageSums
	by := map[[2]string]*usageOut{}
	for i := range rows {
		r := &rows[i]
		var g [2]string
		for j, name := range groups {
			switch name {
			case "day":
				g[j] = r.Day
			case "model":
				g[j] = r.Model
			case "key":
				g[j] = r.Key
			case "user":
				g[j] = r.User
			case "team":
				g[j] = r.Team
			}
		}
		o := by[g]
		if o == nil {
			o = &usageOut{group: g}
			by[g] = o
		}
		o.Add(&r.UsageSums)
		total.Add(&r.UsageSums)
	}
	out := make([]usageOut, 0, len(by))
	for _, o := range by {
		out = append(out, *o)
	}
	sortUsage(out, groups)
	return out, total
}

// sortUsage orders rows: by day first when day is the first group (a time
// series), else the largest spend first (cost, then what the cache saved,
// then requests), then by the group values.
func sortUsage(rows []usageOut, groups []string) {
	byDay := groups[0] == "day"
	slices.SortFunc(rows, func(a, b usageOut) int {
		if byDay {
			if c := cmp.Compare(a.group[0], b.group[0]); c != 0 {
				return c
			}
		}
		if c := cmp.Compare(b.CostUSD, a.CostUSD); c != 0 {
			return c
		}
		if c := cmp.Compare(b.SavedUSD, a.SavedUSD); c != 0 {
			return c
		}
		if c := cmp.Compare(b.Requests+b.CachedRequests, a.Requests+a.CachedRequests); c != 0 {
			return c
		}
		if c := cmp.Compare(a.group[0], b.group[0]); c != 0 {
			return c
		}
		return cmp.Compare(a.group[1], b.group[1])
	})
}
