package edge

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"switchyard/cluster"
)

// Reading usage by level (SPEC 3.1) in Redis, for GET /admin/usage: off
// the request path, pipelined, bounded by rowsReadTimeout.

const (
	// rowsReadTimeout bounds a whole read (every team and day asked for).
	rowsReadTimeout = 5 * time.Second
	// rowsPipe is how many HGETALLs go in one pipeline.
	rowsPipe = 1000
)

// UsageRows implements State: the days' hashes of q's teams, read in
// pipelines of HGETALL. Rows this node's writer holds and has not sent yet
// (at most redis usage_every, 10s by default, or an outage's worth) are not
// counted, as in Usage: every replica then answers the same. When Redis does
// not answer (breaker open, an error, the timeout), the answer is what this
// node holds for Redis, with Shared false: the rows it served since Redis
// went away (and up to one usage_every before), which the writer sends when
// Redis is back. A node keeps no copy of the cluster's rows: with 10,000
// teams one was 10 MB and a lock per request.
//
// Each pipeline's replies are folded into the report before the next is
// sent, so what a read holds is one pipeline and the rows found, whatever
// the number of teams and days. The console's usage page asks every 15 s:
// holding every reply of 10,000 teams over 30 days (300,000 commands) until
// the end took a node from 148 to 254 MB RSS in two asks.
func (r *Redis) UsageRows(ctx context.Context, q UsageQuery) (UsageReport, error) {
	if !r.Shared() {
		return r.pendingRows(&q), nil
	}
	from, to := dayOf(q.From), dayOf(q.To)
	type hash struct {
		team string
		day  int32
		cmd  *redis.MapStringStringCmd
	}
	part := make([]hash, 0, min(rowsPipe, len(q.Teams)*int(max(0, to-from+1))))
	// each day's key suffix and date, made once for every team's hash of
	// that day (300,000 hashes made a date string and a suffix each)
	names, dates := make([]string, 0, max(0, to-from+1)), make([]string, 0, max(0, to-from+1))
	for d := from; d <= to; d++ {
		dates = append(dates, dayString(d))
		names = append(names, "usage:"+dates[len(dates)-1])
	}
	ctx, cancel := context.WithTimeout(ctx, rowsReadTimeout)
	defer cancel()
	rep := UsageReport{Shared: true, Folded: r.w.rowFolded.Load()}
	// send reads the hashes in part and folds their rows into rep
	send := func() bool {
		_, err := r.c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for j := range part {
				part[j].cmd = p.HGetAll(ctx, cluster.TeamKey(r.cfg.Prefix, part[j].team, names[part[j].day-from]))
			}
			return nil
		})
		var re redis.Error
		if err != nil && !errors.As(err, &re) { // a reply error (a key of another type) spoils its hash alone
			return false
		}
		for _, h := range part {
			rep.Rows = appendHashRows(rep.Rows, &q, h.team, h.day, dates[h.day-from], from, to, h.cmd.Val())
		}
		part = part[:0]
		if usageRowsBatchHook != nil {
			usageRowsBatchHook()
		}
		return true
	}
	for _, team := range q.Teams {
		for d := from; d <= to; d++ {
			part = append(part, hash{team: team, day: d})
			if len(part) == rowsPipe && !send() {
				return r.pendingRows(&q), nil
			}
		}
	}
	if len(part) > 0 && !send() {
		return r.pendingRows(&q), nil
	}
	return rep, nil
}

// usageRowsBatchHook, when set (tests), runs after each pipeline's rows
// are folded.
var usageRowsBatchHook func()

// appendHashRows appends the rows of one team's hash of one day (date:
// its dayString; fields as rowField writes them) that q asks for.
func appendHashRows(out []UsageRow, q *UsageQuery, team string, day int32, date string, from, to int32, fields map[string]string) []UsageRow {
	if len(fields) == 0 {
		return out // most hashes of a long range were never written
	}
	rows := map[rowKey]*UsageSums{}
	for f, v := range fields {
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
