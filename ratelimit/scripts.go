package ratelimit

import "github.com/redis/go-redis/v9"

// The Lua scripts run on Redis's clock (TIME, in microseconds) so replicas
// with skewed clocks agree, touch only keys of one team (one hash tag, one
// Cluster slot) and give every key a TTL.
//
// The rpm and tpm GCRA TATs of a team share one string key, "rtat:ttat", so
// an admission costs one GET and one SET. TATs are microsecond timestamps
// (16 digits, possibly fractional): they are written with
// string.format('%.17g'), which round-trips a double exactly (never Lua's
// tostring or '..' on a number, which keep 14 digits), and read back with
// tonumber. A part that is 0 (or anything not after now) is a full bucket.
//
// Kind codes: 1 rpm, 2 tpm, 3 parallel, 4 budget.

// tatLua is shared by both scripts: reading and writing the TAT key.
const tatLua = `
local function gettat(k)
  local v = redis.call('GET', k)
  if not v then return 0, 0 end
  local a, b = string.match(v, '^([^:]*):(.*)$')
  return tonumber(a) or 0, tonumber(b) or 0
end
-- settat stores both TATs, with a TTL reaching the moment both buckets are
-- full again; when both already are, the key is deleted.
local function settat(k, r, t, now)
  local m = math.max(r, t)
  if m <= now then
    redis.call('DEL', k)
    return
  end
  if r <= now then r = 0 end
  if t <= now then t = 0 end
  redis.call('SET', k, string.format('%.17g:%.17g', r, t), 'PX', math.ceil((m - now) / 1000) + 1)
end
`

// admitLua checks and charges every dimension of one admission at once.
//
//	KEYS: 1 rpm+tpm TATs ("rtat:ttat"), 2 parallel slots (zset id -> expiry), 3 budget (hash p, usd)
//	ARGV: 1 rpm, 2 tpm, 3 max_parallel, 4 budget usd, 5 budget period (s),
//	      6 tokens to reserve (already capped at tpm), 7 slot id, 8 slot ttl (ms)
//	returns {allowed, kind, wait us, rpm remaining, rpm reset us,
//	         tpm remaining, tpm reset us}
//
// A dimension whose limit is 0 is skipped and its key never touched (the
// TAT key only when both rpm and tpm are 0; a disabled part is kept as
// stored). When several dimensions reject, kind is the one with the longest
// wait (the one that binds) and nothing is charged.
const admitLua = tatLua + `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local W = 60000000
local TOL = 1
local rpm, tpm, par = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local budget, period = tonumber(ARGV[4]), tonumber(ARGV[5]) * 1000000
local cost = tonumber(ARGV[6])
local wait, kind = 0, 0

local rraw, traw = 0, 0
if rpm > 0 or tpm > 0 then rraw, traw = gettat(KEYS[1]) end
local rtat, rnext, ttat, tnext = now, now, now, now
if rpm > 0 then
  rtat = rraw
  if rtat < now then rtat = now end
  rnext = rtat + W / rpm
  local w = rnext - W - now
  if w > TOL and w > wait then wait, kind = w, 1 end
end
if tpm > 0 then
  ttat = traw
  if ttat < now then ttat = now end
  tnext = ttat + cost * W / tpm
  local w = tnext - W - now
  if w > TOL and w > wait then wait, kind = w, 2 end
end
if par > 0 and redis.call('ZCARD', KEYS[2]) >= par then
  -- full: drop slots past their TTL backstop (leaked by a dead process), count again
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
  if redis.call('ZCARD', KEYS[2]) >= par then
    if 1000000 > wait then wait, kind = 1000000, 3 end
  end
end
if budget > 0 and period > 0 then
  local p = math.floor(now / period)
  local h = redis.call('HMGET', KEYS[3], 'p', 'usd')
  if tonumber(h[1]) == p and (tonumber(h[2]) or 0) >= budget then
    local w = (p + 1) * period - now
    if w > wait then wait, kind = w, 4 end
  end
end

local allowed = 0
if kind == 0 then
  allowed = 1
  local write = false
  if rpm > 0 then
    rtat, rraw, write = rnext, rnext, true
  end
  if tpm > 0 and cost > 0 then
    ttat, traw, write = tnext, tnext, true
  end
  if write then settat(KEYS[1], rraw, traw, now) end
  if par > 0 then
    local ttl = tonumber(ARGV[8])
    redis.call('ZADD', KEYS[2], now + ttl * 1000, ARGV[7])
    redis.call('PEXPIRE', KEYS[2], ttl)
  end
end

-- header values: units left at now, and microseconds until the bucket is full
local rrem, rres, trem, tres = rpm, 0, tpm, 0
if rtat > now then
  rres = math.ceil(rtat - now)
  rrem = math.max(0, math.min(rpm, math.floor((W - (rtat - now) + TOL) * rpm / W)))
end
if ttat > now then
  tres = math.ceil(ttat - now)
  trem = math.max(0, math.min(tpm, math.floor((W - (ttat - now) + TOL) * tpm / W)))
end
return {allowed, kind, math.ceil(wait), rrem, rres, trem, tres}
`

// reconcileLua applies one coalesced batch of a team's post-response writes:
// a TPM delta (refund or charge), budget spend and slot releases.
//
//	KEYS: 1 rpm+tpm TATs ("rtat:ttat"), 2 budget hash, 3 parallel slots, 4 this node's applied-batch mark
//	ARGV: 1 tpm, 2 token delta, 3 usd, 4 budget period (s), 5 batch seq,
//	      6 mark ttl (ms), 7... slot ids to release
//	returns 1 when applied, 0 when this batch was already applied
//
// The mark makes the batch idempotent: the flusher resends a batch whose
// first send failed in an unknown state (a timeout) with the same seq, and
// seqs of one node only grow, so a resend of an applied batch is a no-op.
//
// A refund is not a negative-cost admission: the TPM TAT moves back by the
// refund but never below now, and when it reaches now that part is a full
// bucket (the key is deleted if the rpm part is full too), so a refund
// larger than the outstanding debt restores exactly the full quota instead
// of being lost. The rpm part is kept as it is.
const reconcileLua = tatLua + `
local seq = tonumber(ARGV[5])
local last = tonumber(redis.call('GET', KEYS[4]) or -1)
if seq <= last then return 0 end
redis.call('SET', KEYS[4], ARGV[5], 'PX', ARGV[6])

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local W = 60000000
local tpm, delta, usd = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local period = tonumber(ARGV[4]) * 1000000

if tpm > 0 and delta ~= 0 then
  local rtat, tat = gettat(KEYS[1])
  if tat < now then tat = now end
  settat(KEYS[1], rtat, tat + delta * W / tpm, now)
end
if usd > 0 and period > 0 then
  local p = math.floor(now / period)
  if tonumber(redis.call('HGET', KEYS[2], 'p')) == p then
    redis.call('HINCRBYFLOAT', KEYS[2], 'usd', ARGV[3])
  else
    redis.call('HSET', KEYS[2], 'p', p, 'usd', ARGV[3])
  end
  redis.call('PEXPIRE', KEYS[2], math.ceil(((p + 1) * period - now) / 1000) + 60000)
end
if #ARGV > 6 then
  redis.call('ZREM', KEYS[3], unpack(ARGV, 7))
end
return 1
`

// The scripts, loaded once per process: EVALSHA, falling back to EVAL on
// NOSCRIPT (after a Redis restart or failover).
var (
	admitScript     = redis.NewScript(admitLua)
	reconcileScript = redis.NewScript(reconcileLua)
)
