package edge

import (
	"context"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// The Lua scripts run on Redis's clock (TIME, in microseconds) so replicas
// with skewed clocks agree, touch only keys of one team (one hash tag, one
// Cluster slot) and give every key a TTL. They are the shared twin of
// ratelimit.Local: the scenario table in limits_test.go runs against both.
//
// The rpm and tpm GCRA TATs of a team share one string key, so an admission
// costs one GET and one SET. TATs are microsecond timestamps with fractions
// (a charge of one token at a high TPM moves a TAT by less than 1 µs), kept
// exactly: on a server with Lua's struct library (Redis, Valkey) the value
// is the two doubles packed little-endian, 16 bytes (struct.pack('<dd'),
// bit for bit); elsewhere (miniredis, which the fast tests use) it is
// "rtat:ttat" written with string.format('%.17g'), which round-trips a
// double too (never Lua's tostring or '..' on a number, which keep 14
// digits). Formatting and parsing the text cost Redis about 2 µs per key
// touched, packing about 0.2 (measured in a script loop on Redis 7.0):
// a call that admits requests of many teams, keys or end users touches one
// key per level. Both forms are read, told apart by length (the text of two
// µs timestamps is never 16 bytes), so keys written before a node was
// upgraded keep their state. A part that is 0 (or anything not after now)
// is a full bucket.
//
// Kind codes: 1 rpm, 2 tpm, 3 parallel, 4 budget (ratelimit.Kinds).

// tatLua is shared by both scripts: reading and writing the TAT key.
const tatLua = `
-- the globals the scripts call, as locals: a global is a table lookup on
-- every use, a local a register
local call, tonumber, unpack = redis.call, tonumber, unpack
local max, min, floor, ceil = math.max, math.min, math.floor, math.ceil
local fmt, match = string.format, string.match
-- The GCRA of SPEC 3 on the window W (us), one copy for both admission
-- scripts and the finish: gcra is the TAT charging cost units at limit
-- would leave and the wait that puts on the request (refused past TOL);
-- left is a TAT's header values: units left at now and us until full.
local W, TOL = 60000000, 1
local function gcra(raw, now, cost, limit)
  local t = max(raw, now) + cost * W / limit
  return t, t - W - now
end
local function left(tat, now, limit)
  if limit <= 0 or tat <= now then return limit, 0 end
  return max(0, min(limit, floor((W - (tat - now) + TOL) * limit / W))), ceil(tat - now)
end
-- the TAT codec (see the package's comment on the TAT key): packed doubles
-- where the server has struct, text elsewhere
local pack, unpackdd = nil, nil
local S = rawget(_G, 'struct') -- a missing global read directly is an error
if S then pack, unpackdd = S.pack, S.unpack end
-- gettat reads both TATs, and whether the key holds them packed (16 bytes:
-- settat may then overwrite them in place)
local function gettat(k)
  local v = call('GET', k)
  if not v then return 0, 0, false end
  if #v == 16 and unpackdd then
    local a, b = unpackdd('<dd', v)
    return a, b, true
  end
  local a, b = match(v, '^([^:]*):(.*)$')
  return tonumber(a) or 0, tonumber(b) or 0, false
end
-- settat stores both TATs. The key lives at least until both buckets are
-- full again (max(r, t)), with its expiry rounded up to a multiple of G (10 s
-- of Redis's clock): every writer keeps the key's expiry at or after the
-- rounded larger TAT it stores, so a writer whose new rounded TAT is not
-- past the one it read (prev: the larger TAT read, 0 when the key was
-- absent) keeps the TTL. Under steady traffic one write in G sets a TTL,
-- the costly part of a SET in a script (Redis rewrites PX into PXAT for
-- replicas and AOF). A write that keeps the TTL of a key read as packed
-- (packed: gettat's third value) overwrites its 16 bytes in place:
-- SETRANGE keeps the TTL and the value's allocation, and costs Redis 0.35
-- us less than a SET with KEEPTTL (1.14 against 1.49 us a call, measured in
-- a script loop over 10,000 keys on Redis 7.0); a key of the text form
-- (longer) is replaced whole. When both buckets are already full the key
-- is deleted.
local G = 10000000
local function settat(k, r, t, now, prev, packed)
  local m = max(r, t)
  if m <= now then
    call('DEL', k)
    return
  end
  if r <= now then r = 0 end
  if t <= now then t = 0 end
  local v
  if pack then v = pack('<dd', r, t) else v = fmt('%.17g:%.17g', r, t) end
  local e = ceil(m / G) * G
  if prev > 0 and e <= ceil(prev / G) * G then
    if packed then -- read packed, so pack is there too: v is 16 bytes
      call('SETRANGE', k, '0', v) -- a string: a number argument is formatted by Redis
    else
      call('SET', k, v, 'KEEPTTL')
    end
  else
    call('SET', k, v, 'PX', ceil((e - now) / 1000) + 1)
  end
end
`

// leaseLua is the coalescing lease of SPEC 18, shared by the scripts that
// read response-cache entries (beginLua, gcraLua, readLua). The lease lives
// in the entry's own key k until the entry replaces it (its token starts
// with LeaseMark, which no entry does): claim is the role of an admitted
// request (admitted) with token tok and ttl (ms), given v, what the script
// read of k (empty when absent): 1 the entry is missing, and the request took the
// lease and leads; 2 another request holds it, and the lease is marked
// ('+' appended to its token, once) so that its holder publishes a notice
// when it ends; 0 the entry was found (or the request was refused):
// nothing is taken. The holder alone renews or ends a lease (finishLua
// compares the token); the callers read a lease as a missing entry
// (Pins.set).
const leaseLua = `
local function claim(k, tok, ttl, admitted, v)
  if not admitted then return 0 end
  if v == '' then
    redis.call('SET', k, tok, 'PX', ttl)
    return 1
  end
  if string.byte(v, 1) ~= 0 then return 0 end
  if string.sub(v, -1) ~= '+' then redis.call('APPEND', k, '+') end
  return 2
end
`

// periodLua is the budget window of a period code on Redis's clock (µs),
// ratelimit.PeriodWindow's twin (TestWindowParity): -3 days, -1 weeks from
// Monday, -2 calendar months, all UTC; > 0 a duration of that many seconds
// whose window opens with a spend: start is the window the level's last
// spend opened (nil or 0: none), the window while it lasts, else the one a
// spend now opens (id now). Months use the civil-from-days arithmetic of
// H. Hinnant's date algorithms. Ids are written with fmt('%d'): a
// duration's is a µs timestamp, too long for Lua's 14-digit tostring.
const periodLua = `
local DAY = 86400000000
local function civil(days)
  local z = days + 719468
  local era = floor(z / 146097)
  local doe = z - era * 146097
  local yoe = floor((doe - floor(doe / 1460) + floor(doe / 36524) - floor(doe / 146096)) / 365)
  local doy = doe - (365 * yoe + floor(yoe / 4) - floor(yoe / 100))
  local mp = floor((5 * doy + 2) / 153)
  local m = mp < 10 and mp + 3 or mp - 9
  local y = yoe + era * 400
  if m <= 2 then y = y + 1 end
  return y, m
end
local function firstday(y, m)
  if m <= 2 then y = y - 1 end
  local era = floor(y / 400)
  local yoe = y - era * 400
  local mp = m > 2 and m - 3 or m + 9
  local doe = yoe * 365 + floor(yoe / 4) - floor(yoe / 100) + floor((153 * mp + 2) / 5)
  return era * 146097 + doe - 719468
end
local function window(now, code, start)
  if code == -3 then
    local id = floor(now / DAY)
    return id, (id + 1) * DAY
  elseif code == -1 then
    local w = 7 * DAY
    local id = floor((now - 4 * DAY) / w)
    return id, (id + 1) * w + 4 * DAY
  elseif code == -2 then
    local y, m = civil(floor(now / DAY))
    local ny, nm = y, m + 1
    if nm > 12 then ny, nm = y + 1, 1 end
    return y * 12 + m - 1, firstday(ny, nm) * DAY
  end
  local p = code * 1000000
  if start and start > 0 and now >= start and now < start + p then return start, start + p end
  return now, now + p
end
`

// beginLua is Begin's one round trip for the admissions of one or more
// teams (concurrent Begins share one call: see combiner; on one shard a
// call carries every team of a batch, on Cluster one team): per team, this
// node's pending slot releases of it, then each admission in turn, every
// dimension of every level at once (SPEC 3.1: team, key, end user; all or
// nothing), with the pins it reads.
//
//	KEYS: per team: 1 rpm+tpm TATs, 2 parallel slots (zset id -> lease
//	      expiry), 3 budget (hash p, usd, r: the part of usd that is
//	      reservations of requests still running), then the slot set of each slot
//	      to add (below), then per admission in order: the
//	      same three keys of each of its key and user levels, then the pins
//	      it reads (a response-cache entry first), then its coalescing
//	      lease when it asks for one
//	ARGV: 1 slot lease (ms), 2 number of teams, then per team: its level
//	      (below) without the last two, number of releases and the slot ids
//	      to release, number of slots to add (the local fallback's, of
//	      requests still running: localSlots) and their ids, number of
//	      admissions and for each: tokens to reserve
//	      at the team level (capped at its tpm), usd to reserve against its
//	      budget, slot id, number of pins, number of other levels, the
//	      lease's ttl (ms; 0 = no lease) and, with a lease, its token, then
//	      each other level's level
//	      a level: rpm, tpm, max_parallel, budget usd, budget period code
//	      (periodLua), the local fallback's rpm and tpm resets (us; 0 =
//	      nothing to learn), then for a key or user level: tokens and usd
//	      to reserve at that level, number of this node's pending slot
//	      releases of the level and their ids (the first admission of the
//	      call that meets the level carries them)
//	returns for each admission, teams in order {allowed, kind, wait us,
//	         level (0 team, j the j-th other level), then per level, team
//	         first: rpm remaining, rpm reset us, tpm remaining, tpm reset us,
//	         tpm TAT after the charge us, budget window id; then the pin
//	         values ('' when absent), then with a lease the request's role
//	         (leaseLua; nothing is taken for a refused admission)...}
//
// A budget admits a request only when its spend in the window plus the
// request's reservation (its highest possible cost) stays within the
// budget, and charges the reservation at once, so concurrent requests
// cannot overspend (SPEC 3.1); Finish replaces it by the real cost.
//
// Redis's clock is read once per call. A level's TATs first learn the local
// fallback's (each at least now + its reset): what this node admitted
// locally while a call of this team failed, so Redis does not admit it a
// second time. Releases run next, so a release of this node is visible to
// the very next admission (SPEC 3: a sequential client at max_parallel 1 is
// never refused). A dimension whose limit is 0 is skipped and its key never
// touched. When several dimensions or levels reject, kind and level are the
// ones with the longest wait (the one that binds) and nothing is charged at
// any level. A level that several admissions of a call share (a key) is
// read once and written once. A slot's score is its lease expiry: a slot
// whose node stopped renewing it is past its score within one lease and is
// dropped when the set is full. The set's TTL is set to two leases when
// less than one is left, so it always outlives the slots in it.
var beginLua = arrayFields(tatLua + periodLua + leaseLua + `
local t = call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local USDTOL = 1e-9 -- sums of decimal prices are not exact in binary
local lease = tonumber(ARGV[1])
local out = {}

-- open reads a level's state: the arguments from ARGV[i], the keys from
-- KEYS[k]
local function open(i, k)
  -- the fields in levelFields' order (an array: see arrayFields)
  local L = {
    tonumber(ARGV[i]), tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2]), tonumber(ARGV[i + 3]),
    KEYS[k], KEYS[k + 1], KEYS[k + 2],
    0, 0, 0, false, 0, false, false, 0, 0, 0, false, false, 0,
  }
  local lr, lt = tonumber(ARGV[i + 5]), tonumber(ARGV[i + 6])
  if L.rpm > 0 or L.tpm > 0 then L.rraw, L.traw, L.packed = gettat(L.ktat) end
  L.prev = max(L.rraw, L.traw)
  if L.rpm > 0 and lr > 0 and now + lr > L.rraw then L.rraw, L.write = now + lr, true end
  if L.tpm > 0 and lt > 0 and now + lt > L.traw then L.traw, L.write = now + lt, true end
  if L.par > 0 then L.pcount = call('ZCARD', L.kpar) end
  if L.budget > 0 then
    local h = call('HMGET', L.kbud, 'p', 'usd', 'r')
    local stored = tonumber(h[1])
    L.bid, L.bend = window(now, tonumber(ARGV[i + 4]), stored)
    if stored == L.bid then L.spent, L.res = tonumber(h[2]) or 0, tonumber(h[3]) or 0 end
  end
  return L
end

-- check is the wait (us) and kind level L puts on an admission of cost
-- tokens and usd, and the TATs charging it would leave
local function check(L, cost, usd)
  local wait, kind, rnext, tnext = 0, 0, 0, 0
  if L.rpm > 0 then
    local w
    rnext, w = gcra(L.rraw, now, 1, L.rpm)
    if w > TOL then wait, kind = w, 1 end
  end
  if L.tpm > 0 then
    local w
    tnext, w = gcra(L.traw, now, cost, L.tpm)
    if w > TOL and w > wait then wait, kind = w, 2 end
  end
  if L.par > 0 and L.pcount >= L.par then
    if not L.purged then
      -- full: drop slots whose lease ran out (their node died), count again
      call('ZREMRANGEBYSCORE', L.kpar, '-inf', now)
      L.pcount, L.purged = call('ZCARD', L.kpar), true
    end
    if L.pcount >= L.par and 1000000 > wait then wait, kind = 1000000, 3 end
  end
  if L.budget > 0 and (L.spent >= L.budget or L.spent + usd > L.budget + USDTOL) and L.bend - now > wait then
    wait, kind = L.bend - now, 4
  end
  return wait, kind, rnext, tnext
end

local function charge(L, cost, usd, slot, rnext, tnext)
  if L.rpm > 0 then L.rraw, L.write = rnext, true end
  if L.tpm > 0 and cost > 0 then L.traw, L.write = tnext, true end
  if L.par > 0 then
    call('ZADD', L.kpar, now + lease * 1000, slot)
    L.pcount, L.added = L.pcount + 1, true
  end
  if L.budget > 0 and usd > 0 then L.spent, L.res, L.bwrite = L.spent + usd, L.res + usd, true end
end

-- report appends L's header values: units left at now, microseconds until
-- the bucket is full, the TPM TAT and the budget window
local function report(L)
  local ttat = max(L.traw, now)
  local rrem, rres = left(L.rraw, now, L.rpm)
  local trem, tres = left(ttat, now, L.tpm)
  local o = #out
  out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5], out[o + 6] = rrem, rres, trem, tres, ceil(ttat), L.bid
end

local function close(L)
  if L.write then settat(L.ktat, L.rraw, L.traw, now, L.prev, L.packed) end
  if L.bwrite then
    call('HSET', L.kbud, 'p', fmt('%d', L.bid), 'usd', fmt('%.17g', L.spent), 'r', fmt('%.17g', L.res))
    call('PEXPIRE', L.kbud, ceil((L.bend - now) / 1000) + 60000)
  end
  -- the set outlives its newest lease (now + lease) while its TTL is at
  -- least one lease: set to two only then, not on every admission (a
  -- PEXPIRE in a script costs Redis a PEXPIREAT rewrite for replicas)
  if L.added and call('PTTL', L.kpar) < lease then call('PEXPIRE', L.kpar, 2 * lease) end
end

local i, k = 3, 1
for team = 1, tonumber(ARGV[2]) do
  local nrel = tonumber(ARGV[i + 7])
  if nrel > 0 then call('ZREM', KEYS[k + 1], unpack(ARGV, i + 8, i + 8 + nrel - 1)) end
  -- the slots the local fallback gave requests that still run, each in its
  -- level's set, before any set is counted
  local nadd = tonumber(ARGV[i + 8 + nrel])
  for a = 1, nadd do
    local kp = KEYS[k + 2 + a]
    call('ZADD', kp, now + lease * 1000, ARGV[i + 8 + nrel + a])
    if call('PTTL', kp) < lease then call('PEXPIRE', kp, 2 * lease) end
  end
  local T = open(i, k)
  i, k = i + 9 + nrel + nadd, k + 3 + nadd
  local others = nil -- key and user levels opened in this call, by TAT key

  local n = tonumber(ARGV[i]); i = i + 1
  for a = 1, n do
    local cost, usd, slot = tonumber(ARGV[i]), tonumber(ARGV[i + 1]), ARGV[i + 2]
    local np, nsub, lt = tonumber(ARGV[i + 3]), tonumber(ARGV[i + 4]), tonumber(ARGV[i + 5])
    local tok = ARGV[i + 6]
    i = i + 6
    if lt > 0 then i = i + 1 end
    local wait, kind, rnext, tnext = check(T, cost, usd)
    local level = 0
    local subs = nil
    if nsub > 0 then
      subs = {}
      others = others or {}
      for s = 1, nsub do
        -- this node's pending releases of the level, before it is counted
        -- (SPEC 3: a release is visible to the very next admission)
        local nr = tonumber(ARGV[i + 9])
        if nr > 0 then call('ZREM', KEYS[k + 1], unpack(ARGV, i + 10, i + 9 + nr)) end
        local L = others[KEYS[k]]
        if not L then
          L = open(i, k)
          others[KEYS[k]] = L
          others[#others + 1] = L
        elseif nr > 0 and L.par > 0 then
          L.pcount = call('ZCARD', L.kpar)
        end
        local c, u = tonumber(ARGV[i + 7]), tonumber(ARGV[i + 8])
        local w, kd, rn, tn = check(L, c, u)
        if kd > 0 and w > wait then wait, kind, level = w, kd, s end
        subs[s] = {L, c, u, rn, tn}
        i, k = i + 10 + nr, k + 3
      end
    end
    local allowed = 0
    if kind == 0 then
      allowed = 1
      charge(T, cost, usd, slot, rnext, tnext)
      if subs then
        for s = 1, nsub do
          local e = subs[s]
          charge(e[1], e[2], e[3], slot, e[4], e[5])
        end
      end
    end
    local o = #out
    out[o + 1], out[o + 2], out[o + 3], out[o + 4] = allowed, kind, ceil(wait), level
    report(T)
    if subs then
      for s = 1, nsub do report(subs[s][1]) end
    end
    local p1 = #out + 1
    for j = 1, np do
      out[#out + 1] = call('GET', KEYS[k]) or ''
      k = k + 1
    end
    if lt > 0 then
      out[#out + 1] = claim(KEYS[k], tok, lt, allowed == 1, out[p1])
      k = k + 1
    end
  end
  close(T)
  if others then
    for _, L in ipairs(others) do close(L) end
  end
end
return out
`)

// gcraLua is beginLua for a call whose every team has RPM and TPM limits
// only (no max_parallel, budget, key or user level): the common shape,
// which then pays for the GCRA and the pins it reads and nothing else
// (SPEC 16). Its arithmetic and answers are beginLua's for that shape (the
// scenario table runs every team-only case through both), and it reads
// and writes the same TAT key.
//
//	KEYS: per team: its rpm+tpm TATs, then each admission's pins (a
//	      response-cache entry first) and its coalescing lease, in order
//	ARGV: 1 number of distinct limit pairs, then each pair (rpm, tpm),
//	      then the number of teams, then per team: its pair's number (from
//	      1), number of admissions (negated when the local fallback's rpm
//	      and tpm resets, in us, follow), and for each admission: tokens
//	      to reserve, number of pins, the lease's ttl (ms; 0 = no lease)
//	      and, with a lease, its token
//	returns for each admission beginLua's values for a team-only
//	         admission, then its pin values ('' when absent), then with a
//	         lease its role (leaseLua)
//
// Every argument costs Redis about 0.3 us (parsed, made a Lua string,
// converted back): teams of one plan share one pair, and the resets, zero
// unless Redis was unreachable, are sent only when set. A call of 14 teams
// with one admission each took 86.5 us against 95.1 with five arguments a
// team (median of 8 rounds of 1,500 calls, redis-server 7.0 holding
// 10,000 team TATs, 100,000 pins and 300,000 other keys); one team with 14
// admissions the same.
var gcraLua = tatLua + leaseLua + `
local t = call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local out = {}
local nl = tonumber(ARGV[1])
local lim = {}
for j = 1, 2 * nl do lim[j] = tonumber(ARGV[1 + j]) end
local i, k = 3 + 2 * nl, 1
for team = 1, tonumber(ARGV[2 + 2 * nl]) do
  local l, n = 2 * tonumber(ARGV[i]) - 1, tonumber(ARGV[i + 1])
  local rpm, tpm, lr, lt = lim[l], lim[l + 1], 0, 0
  i = i + 2
  if n < 0 then n, lr, lt, i = -n, tonumber(ARGV[i]), tonumber(ARGV[i + 1]), i + 2 end
  local ktat = KEYS[k]
  k = k + 1
  local rraw, traw, packed = gettat(ktat)
  local prev, write = max(rraw, traw), false
  if rpm > 0 and lr > 0 and now + lr > rraw then rraw, write = now + lr, true end
  if tpm > 0 and lt > 0 and now + lt > traw then traw, write = now + lt, true end
  for a = 1, n do
    local cost, np, lt = tonumber(ARGV[i]), tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2])
    i = i + 3
    local wait, kind, rnext, tnext = 0, 0, 0, 0
    if rpm > 0 then
      local w
      rnext, w = gcra(rraw, now, 1, rpm)
      if w > TOL then wait, kind = w, 1 end
    end
    if tpm > 0 then
      local w
      tnext, w = gcra(traw, now, cost, tpm)
      if w > TOL and w > wait then wait, kind = w, 2 end
    end
    local allowed = 0
    if kind == 0 then
      allowed = 1
      if rpm > 0 then rraw, write = rnext, true end
      if tpm > 0 and cost > 0 then traw, write = tnext, true end
    end
    local ttat = max(traw, now)
    local rrem, rres = left(rraw, now, rpm)
    local trem, tres = left(ttat, now, tpm)
    local o = #out
    out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5] = allowed, kind, ceil(wait), 0, rrem
    out[o + 6], out[o + 7], out[o + 8], out[o + 9], out[o + 10] = rres, trem, tres, ceil(ttat), 0
    for j = 1, np do
      out[o + 10 + j] = call('GET', KEYS[k]) or ''
      k = k + 1
    end
    if lt > 0 then
      out[o + 11 + np] = claim(KEYS[k], ARGV[i], lt, allowed == 1, out[o + 11])
      k, i = k + 1, i + 1
    end
  end
  if write then settat(ktat, rraw, traw, now, prev, packed) end
end
return out
`

// readLua is Begin's round trip for a team without limits whose request
// asks for a coalescing lease (without one, an MGET reads its pins): the
// pins, and the lease when the entry is missing, in one call.
//
//	KEYS: the pins to read (the response-cache entry first), then the lease
//	ARGV: 1 the lease's ttl (ms), 2 its token
//	returns the pin values ('' when absent), then the role (leaseLua)
const readLua = leaseLua + `
local n = #KEYS - 1
local out = {}
for j = 1, n do out[j] = redis.call('GET', KEYS[j]) or '' end
out[n + 1] = claim(KEYS[n + 1], ARGV[2], tonumber(ARGV[1]), true, out[1])
return out
`

// levelFields are the fields of a level's table in beginLua, in the order
// of its array part. The script reads and writes them as L.<field> and is
// compiled with L[<index>] (arrayFields): a table whose 19 values are an
// array is cheaper to build and read than one with 19 named fields (5 µs
// less per call, one admission at a time on a real redis-server). No field
// is a prefix of another.
var levelFields = [...]string{
	"rpm", "tpm", "par", "budget", "ktat", "kpar", "kbud",
	"rraw", "traw", "prev", "write", "pcount", "purged", "added",
	"spent", "bid", "bend", "bwrite", "packed", "res",
}

// arrayFields rewrites L.<field> into L[<index>] in src.
func arrayFields(src string) string {
	pairs := make([]string, 0, 2*len(levelFields))
	for i, f := range levelFields {
		pairs = append(pairs, "L."+f, "L["+strconv.Itoa(i+1)+"]")
	}
	return strings.NewReplacer(pairs...).Replace(src)
}

// The scripts, loaded once per process: EVALSHA, falling back to EVAL on
// NOSCRIPT (after a Redis restart or failover).
var (
	beginScript  = redis.NewScript(beginLua)
	gcraScript   = redis.NewScript(gcraLua)
	readScript   = redis.NewScript(readLua)
	finishScript = redis.NewScript(finishLua)
)

// rerunNoScript sends again, with EVAL (which caches the script again), the
// pipelined calls of cmds that Redis refused with NOSCRIPT: its script cache
// was flushed (a restart, a failover), so they did not run. call(i) is the
// script, keys and arguments of cmds[i].
func rerunNoScript(ctx context.Context, c Client, cmds []*redis.Cmd, call func(i int) (*redis.Script, []string, []any)) {
	var again []int
	for i, cmd := range cmds {
		if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
			again = append(again, i)
		}
	}
	if len(again) == 0 {
		return
	}
	_, _ = c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, i := range again {
			s, keys, args := call(i)
			cmds[i] = s.Eval(ctx, p, keys, args...)
		}
		return nil
	})
}
