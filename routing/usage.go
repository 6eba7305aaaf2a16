package routing

import (
	"time"
)

// UsageSource counts each deployment's requests and tokens over the last
// minute, for its own RPM/TPM quota and for the `usage` strategy (SPEC 1,
// 5). The router records a request, with its estimated tokens (prompt plus
// expected output, as providers count them against their own limits), when
// it hands out an attempt on a deployment that has a quota, and only asks
// about such deployments. LocalUsage counts on this node; the cluster
// implementation (ratelimit.RedisUsage has this method set) counts
// cluster-wide behind the same interface. Usage is called on the selection
// path: implementations must be safe for concurrent use and never wait on I/O.
type UsageSource interface {
	// Record counts one request of tokens on the deployment. The stamp it
	// returns says where the request was counted, for Unrecord.
	Record(deployment string, tokens int64) (stamp int64)
	// Unrecord takes back a request Record counted (stamp is what Record
	// returned): an attempt handed out and never sent (Attempt.Withdraw).
	// A count that already left the window is not taken back twice.
	Unrecord(deployment string, tokens, stamp int64)
	// Usage returns the deployment's requests and tokens over the last minute.
	Usage(deployment string) (requests, tokens int64)
	// Room returns how long until one more request of est tokens fits the
	// deployment's rpm and tpm (0: no limit) as its window moves on: the
	// Retry-After of a request that only quotas turn away. 0 or less: it
	// fits now, or the source cannot tell. Called on the selection path,
	// only for a deployment over its quota; it never waits on I/O either.
	Room(deployment string, rpm, tpm, est int64) time.Duration
}

// nopUsage counts nothing: NewRouter's stand-in when no UsageSource is
// given, so no deployment ever looks over its quota.
type nopUsage struct{}

func (nopUsage) Record(string, int64) int64                     { return 0 }
func (nopUsage) Unrecord(string, int64, int64)                  {}
func (nopUsage) Usage(string) (requests, tokens int64)          { return 0, 0 }
func (nopUsage) Room(string, int64, int64, int64) time.Duration { return 0 }

// overQuota reports whether one more request of est tokens would exceed the
// deployment's RPM or TPM, given what it used. A request larger than the
// whole TPM is still let through when the minute is otherwise empty, or it
// could never be served.
func overQuota(rpm, tpm, requests, tokens, est int64) bool {
	if rpm > 0 && requests+1 > rpm {
		return true
	}
	return tpm > 0 && tokens > 0 && tokens+est > tpm
}

// untilNextMinute is how long until the current minute ends: the wait
// reported when only quotas stand in the way and the UsageSource cannot
// tell when its window has room (Room).
func untilNextMinute(now time.Time) time.Duration {
	return time.Minute - time.Duration(now.UnixNano()%int64(time.Minute))
}

var _ UsageSource = nopUsage{}
