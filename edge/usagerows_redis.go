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
	var hs []hash
	for _, team := range q.Teams {
		for d := from; d <= to; d++ {
			hs = append(hs, hash{team: team, day: d})
		}
	}
	ctx, cancel := context.WithTimeout(ctx, rowsReadTimeout)
	defer cancel()
	for i := 0; i < len(hs); i += rowsPipe {
		part := hs[i:min(i+rowsPipe, len(hs))]
		_, err := r.c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for j := range part {
				part[j].cmd = p.HGetAll(ctx, cluster.TeamKey(r.cfg.Prefix, part[j].team, "usage:"+dayString(part[j].day)))
			}
			return nil
		})
		var re redis.Error
		if err != nil && !errors.As(err, &re) { // a reply error (a key of another type) spoils its hash alone
			return r.pendingRows(&q), nil
		}
	}
	rep := UsageReport{Shared: true, Folded: r.w.rowFolded.Load()}
	for _, h := range hs {
		rows := map[rowKey]*UsageSums{}
		for f, v := range h.cmd.Val() {
			model, key, user, m, ok := parseField(f)
			if !ok {
				continue
			}
			k := rowKey{day: h.day, model: model, key: key, user: user}
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
		day := dayString(h.day)
		for k, s := range rows {
			rep.Rows = append(rep.Rows, UsageRow{Team: h.team, Day: day, Model: k.model, Key: k.key, User: k.user, UsageSums: *s})
		}
	}
	return rep, nil
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
