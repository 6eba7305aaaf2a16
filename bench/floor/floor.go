// Package floor holds the baselines' one Redis call per request (SPEC 16),
// that bench/floorproxy runs before proxying and that the edge's Begin
// benchmark is compared with. One copy, so the baselines cannot drift apart.
//
//   - GCRA is SPEC 16's floor: the least script an exact, continuous,
//     cluster-wide limiter needs, in go-redis/redis_rate's shape: Redis's
//     TIME, the RPM and TPM theoretical arrival times read with GET and
//     written back with SET ... PX (both keys under one hash tag), and a
//     refusal that writes nothing.
//   - Script is the older fixed-window counter (GET/INCR-shaped), which does
//     less Redis work than SPEC 3 allows; kept as a second reference line.
package floor

import "github.com/redis/go-redis/v9"

// Script counts a request in KEYS[1], a counter that expires a minute
// after its first request.
var Script = redis.NewScript(`
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], 60000) end
return n`)

// Key is the counter both baselines use.
const Key = "floor:{team:bench}:rpm"

// GCRA admits one request of ARGV[3] tokens against an RPM limit
// (ARGV[1], TAT in KEYS[1]) and a TPM limit (ARGV[2], TAT in KEYS[2]) on
// Redis's clock, in microseconds; it returns 1 when admitted, 0 when either
// limit refuses (and then writes nothing).
var GCRA = redis.NewScript(gcraLua + "return 1")

// gcraLua is GCRA without its last line: it returns 0 when a limit refuses
// and goes on when both admit (Miss goes on to the entry).
const gcraLua = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local W = 60000000
local function next(key, limit, cost)
  local tat = tonumber(redis.call('GET', key)) or now
  if tat < now then tat = now end
  local n = tat + cost * W / limit
  return n, n - W <= now
end
local rn, rok = next(KEYS[1], tonumber(ARGV[1]), 1)
local tn, tok = next(KEYS[2], tonumber(ARGV[2]), tonumber(ARGV[3]))
if not (rok and tok) then return 0 end
redis.call('SET', KEYS[1], string.format('%.0f', rn), 'PX', math.ceil((rn - now) / 1000) + 1)
redis.call('SET', KEYS[2], string.format('%.0f', tn), 'PX', math.ceil((tn - now) / 1000) + 1)
`

// GCRAKeys are the two TATs the GCRA floor uses.
var GCRAKeys = []string{"floor:{team:bench}:rtat", "floor:{team:bench}:ttat"}

// GCRAArgs are the GCRA floor's limits and per-request cost: limits as
// high as the gateway's bench team has (never refusing), 20 tokens a request.
var GCRAArgs = []any{100000000, 100000000000, 20}

// Miss is GCRA followed, in the same call, by the least a shared response
// cache's miss needs there (SPEC 18): one SET ... NX GET on the entry's key
// (KEYS[3]) that reads an entry stored by anyone and, when there is none,
// takes the cross-node coalescing lease in that key (value ARGV[4], ttl
// ARGV[5] ms); with ARGV[6] "0" it only GETs the entry (a cache without
// coalescing). It returns the entry, or 1 when admitted without one (the
// lease taken or another's lease found), 0 when a limit refuses. What the
// entry's later write costs is bench/floorproxy's -cache writer's.
var Miss = redis.NewScript(gcraLua + `
local e
if ARGV[6] == '0' then e = redis.call('GET', KEYS[3])
else e = redis.call('SET', KEYS[3], ARGV[4], 'NX', 'GET', 'PX', ARGV[5]) end
if e and string.sub(e, 1, 1) ~= '!' then return e end
return 1`)

// EntryKey is the name of the response-cache entry the miss floor reads
// and writes for a request whose body hashes to sum (hex), under the
// bench team's hash tag like the GCRA keys.
func EntryKey(sum string) string { return "floor:{team:bench}:c:" + sum }
