package edge

import (
	"context"
	"encoding/binary"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"switchyard/catalog"
	"switchyard/config"
	"switchyard/ratelimit"
)

// Usage reads a team's live state for the admin API (SPEC 11); added for
// GET /admin/teams/{name}/usage. It is not on the request path.

// TeamUsage is the team's state and where it was read.
type TeamUsage struct {
	ratelimit.TeamUsage
	// Shared is true when the numbers are the cluster's (read in Redis),
	// false when they are this node's (no Redis, or Redis unreachable).
	Shared bool
}

// usageTimeout bounds the read; admin reads wait longer than admissions.
const usageTimeout = time.Second

// Usage implements State.
func (l *Local) Usage(_ context.Context, t *catalog.Team) (TeamUsage, error) {
	return TeamUsage{TeamUsage: l.lim.Usage(t)}, nil
}

// usageLua reads what the admission script keeps for a team, on Redis's
// clock, writing nothing.
//
//	KEYS: 1 rpm+tpm TATs, 2 parallel slots, 3 budget hash
//	returns {now us, 'rtat:ttat' or '', live slots, budget period or '', usd
//	        or '', the period of the last alert or ''}
var usageScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local tat = redis.call('GET', KEYS[1]) or ''
local n = redis.call('ZCOUNT', KEYS[2], '(' .. string.format('%d', now), '+inf')
local h = redis.call('HMGET', KEYS[3], 'p', 'usd', 'a')
return {string.format('%d', now), tat, n, h[1] or '', h[2] or '', h[3] or ''}
`)

// Usage implements State: the cluster-wide numbers in one read-only script
// over the team's keys, or this node's local share when Redis does not
// answer. Writes this node's writer has not sent yet (at most one flush
// interval, 10ms by default) are not counted.
func (r *Redis) Usage(ctx context.Context, t *catalog.Team) (TeamUsage, error) {
	k := &r.team(t).keys
	tl := t.Team.Level()
	return r.usage(ctx, k.begin(), &tl, func() ratelimit.TeamUsage { return r.local.Usage(t) }), nil
}

// LevelUsage implements State.
func (l *Local) LevelUsage(_ context.Context, t *catalog.Team, lv Level) (TeamUsage, error) {
	return TeamUsage{TeamUsage: l.lim.LevelUsage(ratelimit.Level{Key: localLevelKey(t.Name, &lv), Limits: lv.Limits})}, nil
}

// LevelUsage implements State.
func (r *Redis) LevelUsage(ctx context.Context, t *catalog.Team, lv Level) (TeamUsage, error) {
	if !lv.limited() {
		return TeamUsage{Shared: r.Shared()}, nil
	}
	k := newLevelKeys(r.team(t).keys.base(), &lv)
	return r.usage(ctx, [3]string{k.tat, k.par, k.bud}, lv.Limits, func() ratelimit.TeamUsage {
		return r.local.LevelUsage(ratelimit.Level{Key: k.base, Limits: lv.Limits})
	}), nil
}

// usage reads a level's state (keys tat, par, budget) against its limits.
func (r *Redis) usage(ctx context.Context, keys [3]string, lim *config.Limits, local func() ratelimit.TeamUsage) TeamUsage {
	ctx, cancel := context.WithTimeout(ctx, max(r.timeout, usageTimeout))
	defer cancel()
	res, err := usageScript.Run(ctx, r.c, keys[:]).Slice()
	if err != nil || len(res) != 6 {
		return TeamUsage{TeamUsage: local()}
	}
	str := func(v any) string { s, _ := v.(string); return s }
	nowUS, _ := strconv.ParseInt(str(res[0]), 10, 64)
	now := nowUS * 1000
	rtat, ttat := int64(0), int64(0)
	if ra, tb, ok := decodeTATs(str(res[1])); ok {
		rtat, ttat = int64(ra*1000), int64(tb*1000)
	}
	inflight, _ := res[2].(int64)
	u := TeamUsage{Shared: true, TeamUsage: ratelimit.TeamUsage{
		RPMUsed: ratelimit.UsedFromTAT(rtat, now, max(0, lim.RPM)), TPMUsed: ratelimit.UsedFromTAT(ttat, now, max(0, lim.TPM)), InFlight: inflight,
	}}
	if lim.Budget.USD > 0 {
		code := ratelimit.PeriodCode(ratelimit.BudgetPeriod(lim.Budget))
		stored, _ := strconv.ParseInt(str(res[3]), 10, 64)
		start := stored * 1000 // a duration's window start, µs in the script
		_, u.ResetsAt = ratelimit.BudgetWindow(now, code, start)
		if inScriptWindow(now, code, stored) {
			u.SpentUSD, _ = strconv.ParseFloat(str(res[4]), 64)
			a, err := strconv.ParseInt(str(res[5]), 10, 64)
			u.Alerted = err == nil && a == stored
		}
	}
	return u
}

// decodeTATs reads a TAT key's value in either of tatLua's forms: two
// little-endian doubles (16 bytes) or "rtat:ttat" text. A value in neither
// form, or a TAT that is not a finite number, reads as not ok (a full
// bucket).
func decodeTATs(v string) (r, t float64, ok bool) {
	if len(v) == 16 {
		r = math.Float64frombits(binary.LittleEndian.Uint64([]byte(v[:8])))
		t = math.Float64frombits(binary.LittleEndian.Uint64([]byte(v[8:])))
	} else {
		a, b, found := strings.Cut(v, ":")
		if !found {
			return 0, 0, false
		}
		var errA, errB error
		r, errA = strconv.ParseFloat(a, 64)
		t, errB = strconv.ParseFloat(b, 64)
		if errA != nil || errB != nil {
			return 0, 0, false
		}
	}
	if math.IsNaN(r) || math.IsInf(r, 0) || math.IsNaN(t) || math.IsInf(t, 0) {
		return 0, 0, false
	}
	return r, t, true
}
