package edge

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"switchyard/cluster"
)

// Reading usage by level (SPEC 3.1) in Redis, for GET /admin/usage: off
// the request path, pipelined, bounded by rowsReadTimeout.

const (
	// rowsReadTimeout bounds a whole read (every team and day asked for).
	rowsReadTimeout = 5 * time.Second
	// rowsPipe is about how many days' hashes one pipeline reads (a
	// pipeline holds whole teams, at least one).
	rowsPipe = 1000
)

// UsageRows implements State: the days' hashes of q's teams, read by
// rowsScript, one call per team (its days' keys share its hash tag, so
// this holds on Cluster too) in pipelines of about rowsPipe hashes. Rows
// this node's writer holds and has not sent yet (at most redis usage_every,
// 10s by default, or an outage's worth) are not counted, as in Usage: every
// replica then answers the same. When Redis does not answer (breaker open,
// an error, the timeout), the answer is what this node holds for Redis,
// with Shared false: the rows it served since Redis went away (and up to
// one usage_every before), which the writer sends when Redis is back. A
// node keeps no copy of the cluster's rows: with 10,000 teams one was 10 MB
// and a lock per request.
//
// Each pipeline's replies are folded into the report before the next is
// sent, so what a read holds is one pipeline and the rows found, whatever
// the number of teams and days. The console's usage page asks every 15 s:
// holding every reply of 10,000 teams over 30 days (300,000 hashes) until
// the end took a node from 148 to 254 MB RSS in two asks. Most of those
// hashes were never written; a read of one HGETALL each still allocated
// about 250 bytes a hash in the node (the command, its arguments, its key,
// an empty reply), 75 MB a read, and cost Redis a command each. The script
// answers a team's written days alone, so a day a team did not serve costs
// the node its key's bytes and Redis one lookup inside the script.
func (r *Redis) UsageRows(ctx context.Context, q UsageQuery) (UsageReport, error) {
	if !r.Shared() {
		return r.pendingRows(&q), nil
	}
	from, to := dayOf(q.From), dayOf(q.To)
	// a day's hash lives usageDays (dayExpireAt): an older day holds
	// nothing, and one script call's keys stay a few dozen
	from = max(from, to-usageDays)
	ndays := int(max(0, to-from+1))
	if ndays == 0 || len(q.Teams) == 0 {
		return UsageReport{Shared: true, Folded: r.w.rowFolded.Load()}, nil
	}
	// each day's date and key suffix, made once for every team's key of
	// that day
	dates, suffix := make([]string, ndays), 0
	for d := from; d <= to; d++ {
		dates[d-from] = dayString(d)
		suffix += len(dayKey) + len(dates[d-from])
	}
	perPipe := max(1, rowsPipe/ndays) // teams a pipeline
	type teamRead struct {
		team string
		keys []string
	}
	part := make([]teamRead, 0, min(perPipe, len(q.Teams)))
	// one backing array of keys for a whole pipeline, reused
	keyBuf := make([]string, 0, min(perPipe, len(q.Teams))*ndays)
	ctx, cancel := context.WithTimeout(ctx, rowsReadTimeout)
	defer cancel()
	rep := UsageReport{Shared: true, Folded: r.w.rowFolded.Load()}
	// send reads the teams in part and folds their rows into rep
	send := func() bool {
		cmds := make([]*redis.Cmd, len(part))
		_, err := r.c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for j := range part {
				cmds[j] = rowsScript.EvalSha(ctx, p, part[j].keys)
			}
			return nil
		})
		rerunNoScript(ctx, r.c, cmds, func(j int) (*redis.Script, []string, []any) { return rowsScript, part[j].keys, nil })
		var re redis.Error
		if err != nil && !errors.As(err, &re) { // NOSCRIPT included: rerun above
			return false
		}
		for j, tr := range part {
			days, err := cmds[j].Slice()
			if err != nil {
				if errors.As(err, &re) {
					continue // a reply error spoils its team's days alone
				}
				return false
			}
			for i := 0; i+1 < len(days); i += 2 {
				n, ok := days[i].(int64)
				fv, _ := days[i+1].([]any)
				if !ok || n < 1 || int(n) > ndays {
					continue
				}
				d := from + int32(n) - 1
				rep.Rows = appendHashRows(rep.Rows, &q, tr.team, d, dates[n-1], from, to, fv)
			}
		}
		part, keyBuf = part[:0], keyBuf[:0]
		if usageRowsBatchHook != nil {
			usageRowsBatchHook()
		}
		return true
	}
	for _, team := range q.Teams {
		// the team's keys: one string holding them all, cut in place
		base := cluster.TeamKey(r.cfg.Prefix, team, "")
		var b strings.Builder
		b.Grow(ndays*len(base) + suffix)
		for _, date := range dates {
			b.WriteString(base)
			b.WriteString(dayKey)
			b.WriteString(date)
		}
		all, at, start := b.String(), 0, len(keyBuf)
		for _, date := range dates {
			n := len(base) + len(dayKey) + len(date)
			keyBuf = append(keyBuf, all[at:at+n])
			at += n
		}
		part = append(part, teamRead{team: team, keys: keyBuf[start:len(keyBuf):len(keyBuf)]})
		if len(part) == perPipe && !send() {
			return r.pendingRows(&q), nil
		}
	}
	if len(part) > 0 && !send() {
		return r.pendingRows(&q), nil
	}
	return rep, nil
}

// rowsScript reads one team's usage-by-level hashes of the days asked
// (KEYS: one per day, in order) and answers only those that hold fields:
// for each, its index in KEYS (from 1) and its fields and values, flat. A
// key of another type is skipped (it spoils its own day alone). One EXISTS
// of every key first counts the days there are; they are then looked for
// from the newest day back, and the search stops once all are found: a
// team that served only lately (most of them, in a month's window) costs
// Redis two or three lookups, not one a day, and a team that served
// nothing one.
var rowsScript = redis.NewScript(`
local left = redis.call('EXISTS', unpack(KEYS))
local out = {}
local j = #KEYS
while left > 0 and j >= 1 do
  local h = redis.pcall('HGETALL', KEYS[j])
  if type(h) == 'table' and not h.err then
    if #h > 0 then
      out[#out + 1] = j
      out[#out + 1] = h
      left = left - 1
    end
  else
    left = left - 1
  end
  j = j - 1
end
return out`)

// usageRowsBatchHook, when set (tests), runs after each pipeline's rows
// are folded.
var usageRowsBatchHook func()

// appendHashRows appends the rows of one team's hash of one day (date:
// its dayString) that q asks for: fv is the hash's fields, as rowField
// writes them, and their values, flat, as rowsScript answers them.
func appendHashRows(out []UsageRow, q *UsageQuery, team string, day int32, date string, from, to int32, fv []any) []UsageRow {
	rows := map[rowKey]*UsageSums{}
	for i := 0; i+1 < len(fv); i += 2 {
		f, ok1 := fv[i].(string)
		v, ok2 := fv[i+1].(string)
		if !ok1 || !ok2 {
			continue
		}
		model, key, user, m, ok := parseField(f)
		if !ok {
			continue
		}
		k := rowKey{day: day, model: model, key: key, user: user}
		if !q.match(k, from, to) {
			continue
		}
		n, err := strconv.ParseFloat(v, 64)
		if err != nil {
			continue
		}
		s := rows[k]
		if s == nil {
			s = &UsageSums{}
			rows[k] = s
		}
		s.set(m, n)
	}
	for k, s := range rows {
		out = append(out, UsageRow{Team: team, Day: date, Model: k.model, Key: k.key, User: k.user, UsageSums: *s})
	}
	return out
}

// pendingRows is the usage rows this node holds for Redis (pending and in
// flight), as q asks for them: the answer while Redis is away.
func (r *Redis) pendingRows(q *UsageQuery) UsageReport {
	b := NewBook()
	r.teams.Range(func(name string, ts *teamState) {
		ts.mu.Lock()
		if ts.has1 {
			b.add(name, ts.row1, &ts.sums1)
		}
		for rk, s := range ts.byLevel {
			b.add(name, rk, s)
		}
		if ts.flight != nil {
			for rk, s := range ts.flight.byLevel {
				b.add(name, rk, s)
			}
		}
		ts.mu.Unlock()
	})
	return UsageReport{Rows: b.Rows(q), Folded: r.w.rowFolded.Load()}
}
