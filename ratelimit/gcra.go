package ratelimit

import "time"

// GCRA (generic cell rate algorithm) on nanosecond integers, the node-local
// twin of the arithmetic in the Lua scripts. A dimension with limit L per
// Window keeps one number, the theoretical arrival time (TAT): the instant at
// which the bucket would be full again. A cost c moves it by c*Window/L from
// max(TAT, now); the charge fits while the new TAT is at most now+Window, so
// a full Window's quota may be used at once and capacity then returns at L
// per Window, continuously.

// tolerance absorbs the rounding of per-unit intervals that do not divide
// Window (rpm 7 is 8.571428571 s per request): a charge that overshoots by
// less than this still fits, so exactly L units fit in a burst.
const tolerance = int64(time.Microsecond)

// maxAhead bounds how far a charge moves a TAT past now (2^60 ns, about
// 36 years: a level that owes that much is refused all the same). A
// reconcile charges what the upstream reported, which is distrusted: 2^40
// tokens at tpm 1000 are 6.6e19 ns, past int64, and the conversion wrapped
// the TAT into the past (a full bucket) instead of holding the level back.
const maxAhead = int64(1) << 60

// interval is the TAT increment of cost units at limit per Window, at most
// maxAhead.
func interval(cost, limit int64) int64 {
	f := float64(cost) * float64(Window) / float64(limit)
	if f >= float64(maxAhead) {
		return maxAhead
	}
	return int64(f)
}

// gcraCharge evaluates a charge of cost at limit: the TAT after it and the
// wait before it would fit (0 when it fits now).
func gcraCharge(tat, now, limit, cost int64) (next int64, wait time.Duration) {
	if tat < now {
		tat = now
	}
	next = tat + interval(cost, limit)
	if over := next - int64(Window) - now; over > tolerance {
		return next, time.Duration(over)
	}
	return next, 0
}

// gcraAdjust applies a reconcile delta (positive: charge more, negative:
// refund) without a limit check. A refund never moves the TAT below now: a
// full bucket is full, so a refund larger than the outstanding debt restores
// exactly the whole quota and no more (the trap of writing a refund as a
// negative-cost admission, which is dropped when it would land in the past).
func gcraAdjust(tat, now, limit, delta int64) int64 {
	if tat < now {
		tat = now
	}
	if delta >= 0 {
		return min(tat+interval(delta, limit), now+maxAhead)
	}
	next := tat - interval(-delta, limit)
	if next < now {
		next = now
	}
	return next
}

// gcraState gives the header values of a dimension whose TAT is tat: units
// remaining at now, and the time until the bucket is full.
func gcraState(tat, now, limit int64) (remaining int64, reset time.Duration) {
	if tat <= now {
		return limit, 0
	}
	free := int64(Window) - (tat - now)
	if free <= 0 {
		return 0, time.Duration(tat - now)
	}
	remaining = int64(float64(free+tolerance) * float64(limit) / float64(Window))
	if remaining > limit {
		remaining = limit
	}
	return remaining, time.Duration(tat - now)
}

// gcraRefund moves tat back by refund (ns on the TAT timeline), by at most
// what a reservation ending at end still holds at now (end - now), and never
// below now. A refund that arrives after its reservation has decayed
// returns nothing: the capacity already came back by itself (SPEC 3).
func gcraRefund(tat, now, refund, end int64) int64 {
	if tat < now {
		return now
	}
	refund = min(refund, max(0, end-now))
	return max(now, tat-refund)
}
