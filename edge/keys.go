package edge

import (
	"sync"
	"sync/atomic"

	"switchyard/catalog"
	"switchyard/cluster"
	"switchyard/config"
	"switchyard/ratelimit"
)

// Key layout: every key of a team, its pins included, carries the team's hash
// tag (cluster.TeamKey), so Begin's one script reads the limits and the pins
// of a request on one Cluster shard, and the writer's one script per team
// writes them back:
//
//	<prefix>{team:<name>}:tat              rpm and tpm TATs
//	<prefix>{team:<name>}:par              max_parallel slots (leases)
//	<prefix>{team:<name>}:budget           budget spend of the period
//	<prefix>{team:<name>}:usage            served requests, tokens and USD by deployment
//	<prefix>{team:<name>}:usage:<day>      usage by level of one UTC day (usagerows.go)
//	<prefix>{team:<name>}:applied:<node>   this node's last applied writer call for the team (Cluster)
//	<prefix>applied:<node>                 this node's last applied writer call (one shard)
//	<prefix>{team:<name>}:pt:<session>|<alias>   tier pin
//	<prefix>{team:<name>}:pd:<session>|<model>   deployment pin
//	<prefix>{team:<name>}:rc:<model>:<64 hex>    response-cache entry (CacheKey), or
//	                                             its coalescing lease while it is missing (LeaseMark)
//	<prefix>coalesce                             channel of the leases' end notices (noticeChannel)
//
// Session keys from sessions.Detect are themselves scoped by team, so a pin
// key never names another team's session. The pin keys are built here and
// nowhere else (tierPinKey, depPinKey); the local pin store uses the same
// names without the prefix.

// teamKeys are one team's keys, built once (no allocation per call) in one
// string, all, whose parts they are: base "tat" base "par" base "budget"
// base "usage" base "applied:" node. The parts are cut from it when asked
// for (their lengths follow from base's), so a team's record holds one
// string header for them, not eight: with 10,000 teams the collector reads
// its records on every cycle.
type teamKeys struct {
	all string
	n   int // len(base)

	limits atomic.Pointer[boxedLimits]
	users  atomic.Pointer[boxedLevel] // the end-user level's (userArgs)
}

func newTeamKeys(prefix, team, node string) *teamKeys {
	k := &teamKeys{}
	k.init(prefix, team, node)
	return k
}

// init fills k in place (a teamState holds its keys by value: one object a
// team fewer for the collector).
func (k *teamKeys) init(prefix, team, node string) {
	b := cluster.TeamKey(prefix, team, "")
	k.all, k.n = b+"tat"+b+"par"+b+"budget"+b+"usage"+b+"applied:"+node, len(b)
}

// base is <prefix>{team:<name>}:, which every key of the team starts with.
func (k *teamKeys) base() string { return k.all[:k.n] }

// The team's keys (see Key layout). Offsets into all: each part is base
// and its suffix of 3, 3, 6, 5 and 8+len(node) bytes.
func (k *teamKeys) tat() string    { return k.all[:k.n+3] }
func (k *teamKeys) par() string    { return k.all[k.n+3 : 2*k.n+6] }
func (k *teamKeys) budget() string { return k.all[2*k.n+6 : 3*k.n+12] }
func (k *teamKeys) usage() string  { return k.all[3*k.n+12 : 4*k.n+17] }

// mark is this node's applied-call mark for the team (Cluster).
func (k *teamKeys) mark() string { return k.all[4*k.n+17:] }

// begin are the keys beginLua reads for the team: tat, par, budget.
func (k *teamKeys) begin() [3]string { return [3]string{k.tat(), k.par(), k.budget()} }

// finish are the keys finishLua writes for the team: tat, budget, par,
// usage.
func (k *teamKeys) finish() [4]string { return [4]string{k.tat(), k.budget(), k.par(), k.usage()} }

// dayKey names the team's usage-by-level hash of one UTC day (date:
// dayString), after its keys' base.
const dayKey = "usage:"

// nodeMarkKey names this node's applied-call mark on one shard, where one
// writer call carries many teams.
func nodeMarkKey(prefix, node string) string { return prefix + "applied:" + node }

// tierPinKey names a session's tier pin for a tier route alias (SPEC 4:
// pins are per team, alias and session).
func tierPinKey(session, alias string) string { return "pt:" + session + "|" + alias }

// depPinKey names a session's deployment pin in one public model's pool (a
// session that moves to another pool must not look up a deployment of the
// old one, SPEC 8).
func depPinKey(session, model string) string { return "pd:" + session + "|" + model }

// LeaseMark starts the value of a response-cache entry's key while a
// request holds its coalescing lease (SPEC 18): the lease lives in the
// entry's own key until the entry replaces it, so a miss creates one key
// and the entry's SET ends the lease in the same command. An encoded entry
// never starts with it (cache.Entry.Encode begins with its magic byte).
const LeaseMark = "\x00"

// IsLease reports whether v, read from an entry's key, is a lease, not an
// entry.
func IsLease(v string) bool { return len(v) > 0 && v[0] == LeaseMark[0] }

// noticeChannel is the one channel on which leaders announce the end of
// their leases (SPEC 18): a message is the outcome ('1' the entry is
// stored, '2' the leader failed) followed by the lease's full name. One
// channel for the cluster, subscribed once per node, instead of one per
// entry: a follower never waits for a SUBSCRIBE of its own (nor misses a
// notice published before it took effect), and a leader publishes only
// when a follower marked its lease, so the channel carries herds only.
func noticeChannel(prefix string) string { return prefix + "coalesce" }

// boxedLimits are ARGV 1-5 of beginLua for one limit tuple, converted to
// interfaces once. Teams with the same limits share one (boxedTuples).
type boxedLimits struct {
	tuple limitTuple
	args  [5]any
}

// limitArgs returns t's boxed limits: the team's last ones while its limits
// are the same, else the shared ones of its new tuple. The tuple is read
// from t on every call (a few fields, no allocation), so a record holds a
// pointer to shared limits and no object of its own for the collector.
func (k *teamKeys) limitArgs(t *catalog.Team) *boxedLimits {
	l := limitTuple{max(0, t.RPM), max(0, t.TPM), max(0, t.MaxParallel), max(0, t.Budget.USD), ratelimit.PeriodCode(ratelimit.BudgetPeriod(t.Budget))}
	if b := k.limits.Load(); b != nil && b.tuple == l {
		return b
	}
	b := boxed(l)
	k.limits.Store(b)
	return b
}

// limitTuple is a team's limit arguments of beginLua, unboxed.
type limitTuple struct {
	rpm, tpm, par int64
	usd           float64
	period        int64
}

// boxedTuples holds one boxed copy of each limit tuple in use: teams with
// the same limits (10,000 teams of a few plans) share the boxed values
// instead of each holding up to five small objects for the collector.
// Bounded by the distinct limits of the config (a reload that changes a
// team's limits adds at most that team's new tuple).
var boxedTuples struct {
	sync.RWMutex
	m map[limitTuple]*boxedLimits
}

// boxed returns the boxed limits of l, made once per process: a tuple in
// use costs a read lock and a map lookup, no allocation.
func boxed(l limitTuple) *boxedLimits {
	boxedTuples.RLock()
	b := boxedTuples.m[l]
	boxedTuples.RUnlock()
	if b != nil {
		return b
	}
	boxedTuples.Lock()
	defer boxedTuples.Unlock()
	b = boxedTuples.m[l]
	if b == nil {
		if boxedTuples.m == nil || len(boxedTuples.m) >= maxBoxedTuples {
			boxedTuples.m = map[limitTuple]*boxedLimits{} // a bound, never reached by a real config: start over
		}
		b = &boxedLimits{tuple: l, args: [5]any{l.rpm, l.tpm, l.par, l.usd, l.period}}
		boxedTuples.m[l] = b
	}
	return b
}

// maxBoxedTuples bounds boxedTuples.
const maxBoxedTuples = 100_000

// boxedLevel are a key or user level's limit arguments of beginLua (rpm,
// tpm, max_parallel, budget usd, budget period code), converted to
// interfaces once.
type boxedLevel struct {
	lim  config.Limits // the limits they were made from (compared by value)
	args [5]any
}

// levelArgs appends lv's limit arguments of beginLua. A key's are the
// shared boxes of its limit tuple (boxed: keys of a few plans share a few).
// An end user's come from the team's last ones when the limits are equal:
// every end user without limits of their own has the team's user_limits,
// so a million of them box these values once, without even boxed's lock.
func (k *teamKeys) levelArgs(args []any, lv *Level) []any {
	if lv.Kind != LevelUser {
		b := boxed(levelTuple(lv))
		return append(args, b.args[:]...)
	}
	b := k.users.Load()
	if b == nil || b.lim != *lv.Limits {
		nb := boxLevel(lv)
		b = &nb
		k.users.Store(b)
	}
	return append(args, b.args[:]...)
}

// boxLevel converts lv's limit arguments of beginLua to interfaces.
func boxLevel(lv *Level) boxedLevel {
	return boxedLevel{lim: *lv.Limits, args: boxed(levelTuple(lv)).args}
}

// levelTuple is lv's limit arguments of beginLua, unboxed.
func levelTuple(lv *Level) limitTuple {
	l := lv.Limits
	return limitTuple{max(0, l.RPM), max(0, l.TPM), max(0, l.MaxParallel), max(0, l.Budget.USD), budgetCode(lv)}
}
