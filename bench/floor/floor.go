// Package floor holds the baseline's one Redis call per request (SPEC 16):
// the rate-limit-shaped script bench/floorproxy runs before proxying, and
// that the edge's Begin benchmark is compared with. One copy, so the two
// baselines cannot drift apart.
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
