package edge

// finishLua applies coalesced batches of post-response writes, sent by the
// writer: on Redis Cluster one call per team per flush (its keys share the
// team's hash tag), on one shard one call per flush for every team with
// something to write, whatever the number of requests they carry.
//
//	KEYS: 1 the applied-batch mark (the team's on Cluster, the node's on one
//	      shard), then per team: rpm+tpm TATs, budget hash, parallel slots,
//	      usage hash, the usage-by-level hash of each day it writes, the
//	      pins to write, the coalescing leases it renews or ends, then the
//	      TATs, budget hash and parallel slots of each key or user level it
//	      writes
//	ARGV: 1 call seq, 2 mark ttl (ms), 3 slot lease (ms), 4 the leases'
//	      notice channel, 5 number of teams,
//	      then per team: the number of its arguments after these two and
//	            of its keys, number of pins, usage ttl (s; negative when its
//	            renewal is not due: only a new field sets it), number of
//	            key and user levels, the team's level (below),
//	            n usage rows and (deployment, requests, tokens, usd) each,
//	            n usage-by-level days (SPEC 3.1), each with its hash's
//	            expiry (unix s), n rows and per row the field prefix
//	            ('<model>|<key>|<user>|', escaped) and its sums (req, in,
//	            cin, out, usd, creq, saved; 0 is skipped),
//	            for each pin key: (value, ttl ms, mode: 0 set, 1 keep a
//	            higher tier, 2 delete), n leases and for each (token, op:
//	            0 renew, 1 end with the entry stored, 2 end without it,
//	            ttl ms), then each key or user level's level
//	      a level: tpm, tokens to charge (>= 0), usd (the real cost minus
//	            the budget reservations: < 0 is a refund), budget period
//	            code, the budget alert's spend (usd x alert_at; 0 = no
//	            check: the batch carries no spend of the level), the
//	            budget reservations settled (taken out of the hash's field
//	            r, what requests still running reserved: the alert
//	            compares usd - r, money spent),
//	            n refunds and n pairs (tokens, reservation end us),
//	            n releases and their slot ids,
//	            n renewals and their slot ids
//	returns 0 when this call was already applied, else {1, then for each
//	        team whose part Redis rejected: its number (from 1), the error,
//	        then, when a level's spend crossed its alert spend for the first
//	        time in the period, 'alerts' and for each such level its team's
//	        number and the level (0 the team, j its j-th other level)}
//
// The mark makes a call idempotent: the writer resends a call whose first
// send failed in an unknown state (a timeout) as it was, with the same seq,
// before it sends anything else under that mark, and seqs of one node only
// grow, so a resend of an applied call is a no-op.
//
// A refund returns at most what its reservation still holds: the part of it
// still ahead of now (end - now), so a refund that arrives after its
// reservation has decayed returns nothing, and the TAT never moves below
// now (SPEC 3). The rpm part is kept as it is.
//
// A coalescing lease (SPEC 18) lives in its entry's key and is renewed or
// ended only by its holder: its value is the holder's token, with '+' once
// a follower has marked it. An end with the entry is the entry's SET
// (mode 3), which replaces the lease and returns it; an end without it
// deletes it. Either, when a follower marked the lease, publishes the
// outcome and the key's name on the notice channel; the ends come after
// the team's pins, so a notice that says the entry is stored is published
// after the SET that stored it, in the same script: a woken follower finds
// the entry.
const finishLua = tatLua + periodLua + `
local seq = tonumber(ARGV[1])
local last = tonumber(call('GET', KEYS[1]) or -1)
if seq <= last then return 0 end
call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])

local lease = tonumber(ARGV[3])
local CHAN = ARGV[4]
-- Redis's clock, read only when a part needs it (usage and pins do not)
local now = nil
local function clock()
  if not now then
    local t = call('TIME')
    now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  end
  return now
end

-- level writes one level's part, its arguments from ARGV[i] and its keys
-- (tat, budget, parallel) from KEYS[k]; it returns the next argument's
-- index and whether the level's alert was raised
local function level(i, k)
  local tpm, charge = tonumber(ARGV[i]), tonumber(ARGV[i + 1])
  local usds, pcode, thr = ARGV[i + 2], tonumber(ARGV[i + 3]), tonumber(ARGV[i + 4])
  local usd, settled = tonumber(usds), tonumber(ARGV[i + 5])
  local ktat, kbudget, kpar = KEYS[k], KEYS[k + 1], KEYS[k + 2]
  i = i + 6
  local alerted = false

  local nref = tonumber(ARGV[i]); i = i + 1
  if tpm > 0 and (charge > 0 or nref > 0) then
    clock()
    local rtat, tat, packed = gettat(ktat)
    local prev = max(rtat, tat)
    if tat < now then tat = now end
    tat = tat + charge * W / tpm
    for j = 1, nref do
      local back = tonumber(ARGV[i]) * W / tpm
      local hold = tonumber(ARGV[i + 1]) - now
      if hold > 0 then tat = tat - min(back, hold) end
      i = i + 2
    end
    if tat < now then tat = now end
    settat(ktat, rtat, tat, now, prev, packed)
  else
    i = i + 2 * nref
  end
  if usd ~= 0 or thr > 0 or settled > 0 then
    -- the real cost minus the reservations (a refund when negative); a
    -- refund for a window that has ended is dropped with that window. A
    -- spend the reservations matched exactly writes nothing but is still
    -- checked against the alert (thr > 0: the batch carries a spend).
    clock()
    local stored = tonumber(call('HGET', kbudget, 'p'))
    local p, e = window(now, pcode, stored)
    local same = stored == p
    local spent = nil
    if usd == 0 then
      if same then spent = tonumber(call('HGET', kbudget, 'usd')) end
    elseif same then
      spent = tonumber(call('HINCRBYFLOAT', kbudget, 'usd', usds))
    elseif usd > 0 then
      -- a new window (a duration's opens with this spend)
      call('HSET', kbudget, 'p', fmt('%d', p), 'usd', usds, 'r', '0')
      spent = usd
    end
    -- field r: the reservations of requests still running, part of usd
    -- (beginLua); the alert is about money spent, so it leaves them out
    local held = 0
    if same and settled > 0 then
      held = tonumber(call('HINCRBYFLOAT', kbudget, 'r', fmt('%.17g', -settled)))
      if held < 1e-9 then
        call('HSET', kbudget, 'r', '0') -- a sum's residue, or a hash written before r
        held = 0
      end
    elseif same and spent and thr > 0 then
      held = tonumber(call('HGET', kbudget, 'r')) or 0
    end
    if usd ~= 0 and (same or usd > 0) then call('PEXPIRE', kbudget, ceil((e - now) / 1000) + 60000) end
    -- the period's one alert: field a holds the period it was raised in
    if spent and thr > 0 and spent - held >= thr and tonumber(call('HGET', kbudget, 'a')) ~= p then
      call('HSET', kbudget, 'a', fmt('%d', p))
      alerted = true
    end
  end
  local nrel = tonumber(ARGV[i]); i = i + 1
  if nrel > 0 then
    call('ZREM', kpar, unpack(ARGV, i, i + nrel - 1))
    i = i + nrel
  end
  local nren = tonumber(ARGV[i]); i = i + 1
  if nren > 0 then
    clock()
    for j = i, i + nren - 1 do
      call('ZADD', kpar, 'XX', now + lease * 1000, ARGV[j])
    end
    call('PEXPIRE', kpar, 2 * lease)
    i = i + nren
  end
  return i, alerted
end

-- apply writes one team's part, its arguments from ARGV[i] and its keys
-- from KEYS[k]; it returns the levels whose alert was raised (0 the team)
local function apply(i, k)
  local np, uttl, nsub = tonumber(ARGV[i]), tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2])
  local kusage = KEYS[k + 3]
  local alerts = {}
  local a
  i, a = level(i + 3, k)
  if a then alerts[#alerts + 1] = 0 end
  k = k + 4

  local nuse = tonumber(ARGV[i]); i = i + 1
  if nuse > 0 then
    local fresh = false
    for j = 1, nuse do
      local d = ARGV[i]
      -- a new field (a new hash, or a deployment new to it) gets the TTL
      -- now; otherwise it is renewed when the writer says it is due
      if call('HINCRBY', kusage, d .. '|req', ARGV[i + 1]) == tonumber(ARGV[i + 1]) then fresh = true end
      call('HINCRBY', kusage, d .. '|tok', ARGV[i + 2])
      if tonumber(ARGV[i + 3]) > 0 then
        call('HINCRBYFLOAT', kusage, d .. '|usd', ARGV[i + 3])
      end
      i = i + 4
    end
    if fresh or uttl > 0 then call('EXPIRE', kusage, math.abs(uttl)) end
  end
  -- usage by level: one hash per UTC day, its keys before the pins'
  local ndays = tonumber(ARGV[i]); i = i + 1
  if ndays > 0 then
    local names = {'req', 'in', 'cin', 'out', 'usd', 'creq', 'saved'}
    for d = 1, ndays do
      local kday, nrow = KEYS[k], tonumber(ARGV[i + 1])
      local exp = ARGV[i]
      k = k + 1
      i = i + 2
      for j = 1, nrow do
        local f = ARGV[i]
        for m = 1, 7 do
          local v = ARGV[i + m]
          if v ~= '0' then
            if m == 5 or m == 7 then
              call('HINCRBYFLOAT', kday, f .. names[m], v)
            else
              call('HINCRBY', kday, f .. names[m], v)
            end
          end
        end
        i = i + 8
      end
      call('EXPIREAT', kday, exp)
    end
  end
  local olds = nil -- what each entry's SET replaced (mode 3), by key
  for j = 1, np do
    local v, ttl, mode = ARGV[i], ARGV[i + 1], ARGV[i + 2]
    i = i + 3
    if mode == '3' then
      olds = olds or {}
      olds[KEYS[k]] = call('SET', KEYS[k], v, 'PX', ttl, 'GET') or ''
    elseif mode == '2' then
      call('DEL', KEYS[k])
    elseif mode == '1' then
      if not call('SET', KEYS[k], v, 'NX', 'PX', ttl) then
        call('PEXPIRE', KEYS[k], ttl)
      end
    else
      call('SET', KEYS[k], v, 'PX', ttl)
    end
    k = k + 1
  end
  local nl = tonumber(ARGV[i]); i = i + 1
  for j = 1, nl do
    local kl, tok, op = KEYS[k], ARGV[i], ARGV[i + 1]
    -- an end with the entry whose SET ran above: the entry replaced the
    -- lease, and that SET returned the lease it replaced
    local replaced = op == '1' and olds and olds[kl]
    local v = replaced or call('GET', kl)
    if v and (v == tok or v == tok .. '+') then
      if op == '0' then
        call('PEXPIRE', kl, ARGV[i + 2])
      else
        if not replaced then call('DEL', kl) end
        if v ~= tok then call('PUBLISH', CHAN, op .. kl) end
      end
    end
    i, k = i + 3, k + 1
  end
  for s = 1, nsub do
    i, a = level(i, k)
    if a then alerts[#alerts + 1] = s end
    k = k + 3
  end
  return alerts
end

-- each team's part runs under pcall: a part Redis rejects (a bad value, a
-- key of another type) stops that team's part alone, and the call reports
-- it (team number, error) instead of dropping the teams after it
local out, alerts = {1}, {}
local i, k = 6, 2
for team = 1, tonumber(ARGV[5]) do
  local na, nk = tonumber(ARGV[i]), tonumber(ARGV[i + 1])
  local ok, res = pcall(apply, i + 2, k)
  if not ok then
    out[#out + 1] = team
    out[#out + 1] = type(res) == 'table' and tostring(res.err) or tostring(res)
  else
    for _, lv in ipairs(res) do
      alerts[#alerts + 1] = team
      alerts[#alerts + 1] = lv
    end
  end
  i, k = i + 2 + na, k + nk
end
if #alerts > 0 then
  out[#out + 1] = 'alerts'
  for _, t in ipairs(alerts) do out[#out + 1] = t end
end
return out
`
