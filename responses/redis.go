package responses

import (
	"context"
	"encoding/json"
	"log/slog"
	"switchyard/internal/redisscript"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"switchyard/cluster"
	"switchyard/wire"
)

// RedisClient is the part of go-redis the shared store uses: scripts and
// pipelines (CONVENTIONS 13). redis.UniversalClient satisfies it.
type RedisClient interface {
	redis.Scripter
	Pipelined(ctx context.Context, fn func(redis.Pipeliner) error) ([]redis.Cmder, error)
}

// queueLen bounds the records waiting for the writer; past it a record is
// kept only locally and counted as dropped.
const queueLen = 4096

// writeTimeout bounds one batch write (off the request path).
const writeTimeout = 2 * time.Second

// guardSlack is what Redis's walk allows beyond twice the byte budget: it
// counts stored JSON (each item's framing, escapes), which is never less
// than wire.Item.Size; the caller makes the exact count before building.
const guardSlack = 1 << 20

// Redis is the shared store. A team's keys share its hash tag (one Cluster
// slot, with its limits and pins):
//
//	<prefix>{team:<name>}:turn:<id>  hash of one turn, TTL store_ttl:
//	                                 p prev id, s session, i input JSON,
//	                                 o output JSON, r response JSON,
//	                                 z its accounted size in bytes
//	<prefix>{team:<name>}:rzs        sorted set "<id>:<size>" by save order
//	<prefix>{team:<name>}:rstore     hash: b bytes accounted, q save sequence
//
// (Records of the earlier, copying format were strings under resp: and
// ritem:; they are never read, so their ids are unknown, and they expire
// by their own TTL.)
//
// Saving a turn and evicting the team's oldest turns past max_team_bytes is
// one script, so one team can never hold more of Redis than its share. A
// turn that expired is still counted until it is the oldest and is
// trimmed; since every turn lives the same TTL, the expired ones are always
// the first to go. The index keys get store_ttl on every save, so they
// outlive every turn they list and vanish with an idle team.
//
// Every record is also kept in the bounded local store at once, so a
// follow-up on the same node reads its own write before the writer has
// sent it, and a node whose Redis is gone still serves its own
// conversations. Reads are bounded by the request-path timeout.
type Redis struct {
	// immutable after NewRedis
	c        RedisClient
	prefix   string
	timeout  time.Duration
	ttl      time.Duration
	maxBytes int64 // max_team_bytes
	local    *Local
	log      *slog.Logger
	queue    chan job
	stop     chan struct{}
	done     chan struct{}

	dropped atomic.Int64
	closing atomic.Bool
}

type job struct {
	team  string
	rec   *Record
	del   string        // a response id to delete after the batch's writes, instead of a record
	flush chan struct{} // a flush marker instead of a record
}

// NewRedis returns the shared store writing under prefix (e.g.
// "switchyard:"), reading with timeout, falling back to local.
func NewRedis(c RedisClient, prefix string, timeout time.Duration, cfg Config, local *Local, log *slog.Logger) *Redis {
	if log == nil {
		log = slog.Default()
	}
	if cfg.MaxTeamBytes < 1 {
		cfg.MaxTeamBytes = 256 << 20
	}
	r := &Redis{c: c, prefix: prefix, timeout: timeout, ttl: cfg.TTL, maxBytes: cfg.MaxTeamBytes, local: local, log: log,
		queue: make(chan job, queueLen), stop: make(chan struct{}), done: make(chan struct{})}
	go r.run()
	return r
}

func (r *Redis) recKey(team, id string) string { return cluster.TeamKey(r.prefix, team, "turn:"+id) }
func (r *Redis) recBase(team string) string    { return cluster.TeamKey(r.prefix, team, "turn:") }
func (r *Redis) indexKey(team string) string   { return cluster.TeamKey(r.prefix, team, "rzs") }
func (r *Redis) teamKey(team string) string    { return cluster.TeamKey(r.prefix, team, "rstore") }

// Dropped reports records that never reached Redis because the queue was full.
func (r *Redis) Dropped() int64 { return r.dropped.Load() }

// Save implements Store: the local copy at once, Redis through the writer.
func (r *Redis) Save(team string, rec *Record) {
	r.local.Save(team, rec)
	if r.closing.Load() {
		return
	}
	select {
	case r.queue <- job{team: team, rec: rec}:
	default:
		r.dropped.Add(1)
		r.log.Warn("response store queue full: response kept on this node only", "response_id", rec.ID)
	}
}

// Load implements Store: the local store first, then one script call that
// walks the rest of the chain and reads the missing referenced outputs in
// Redis, bounded by the request-path timeout and by b. Turns this node
// holds that were written to Redis are checked there in the same call
// (Redis is the authority on them once written: a response deleted or
// evicted through another node is gone here too, SPEC 10.1); with Redis
// unreachable the node's copies answer.
func (r *Redis) Load(ctx context.Context, team, prev string, refs []string, b Budget) (Lookup, error) {
	rd, err := r.local.read(team, prev, refs, b)
	if err != nil {
		return Lookup{}, err
	}
	whole := rd.next == "" && len(rd.missing) == 0 // every turn and item is here
	if whole && len(rd.shared) == 0 && len(rd.sharedRefs) == 0 {
		return Lookup{Chain: oldestFirst(rd.chain), Items: rd.items}, nil
	}
	var rids []string // the responses of the missing refs, each once
	seen := map[string]bool{}
	for _, ref := range append(rd.missing[:len(rd.missing):len(rd.missing)], rd.sharedRefs...) {
		if rid, _ := ItemResponse(ref); !seen[rid] {
			seen[rid] = true
			rids = append(rids, rid)
		}
	}
	depth := max(b.Depth, 1) - len(rd.chain)
	if rd.next != "" && depth < 1 {
		return Lookup{}, ErrTooDeep
	}
	args := make([]any, 0, 5+len(rd.shared)+len(rids))
	args = append(args, r.recBase(team), rd.next, 2*(b.Bytes-rd.used)+guardSlack, depth, len(rd.shared))
	for _, id := range rd.shared {
		args = append(args, id)
	}
	for _, rid := range rids {
		args = append(args, rid)
	}
	cctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	res, err := loadScript.Run(cctx, r.c, []string{r.teamKey(team)}, args...).Slice()
	if err != nil || len(res) < 2 {
		if whole {
			// only this node's copies were to be checked: Redis is
			// unreachable, so they answer (SPEC 9)
			return Lookup{Chain: oldestFirst(rd.chain), Items: rd.items}, nil
		}
		return Lookup{}, ErrUnavailable
	}
	status, _ := res[0].(int64)
	switch status {
	case 1:
		id, _ := res[1].(string)
		for _, rec := range rd.chain {
			if rec.ID == id {
				r.local.drop(team, rec) // deleted or evicted through another node
			}
		}
		return Lookup{}, &MissingError{ID: id}
	case 2:
		return Lookup{}, ErrTooLarge
	case 3:
		return Lookup{}, ErrTooDeep
	}
	n, _ := res[1].(int64)
	res = res[2:]
	if int64(len(res)) < 5*n+2*int64(len(rids)) {
		return Lookup{}, ErrUnavailable
	}
	for k := int64(0); k < n; k++ {
		f := res[5*k : 5*k+5]
		rec := &Record{ID: str(f[0]), Prev: str(f[1]), Session: str(f[2])}
		if json.Unmarshal([]byte(str(f[3])), &rec.Input) != nil || json.Unmarshal([]byte(str(f[4])), &rec.Output) != nil {
			return Lookup{}, &MissingError{ID: rec.ID} // unreadable: as good as gone
		}
		if rd.used += rec.ItemsSize(); rd.used > b.Bytes {
			return Lookup{}, ErrTooLarge // the exact count, past the script's estimate
		}
		rd.chain = append(rd.chain, rec)
	}
	res = res[5*n:]
	byResp := make(map[string]*Record, len(rids))
	for k := range rids {
		if o := str(res[2*k+1]); o != "" {
			rec := &Record{ID: rids[k]}
			if json.Unmarshal([]byte(o), &rec.Output) == nil {
				byResp[rids[k]] = rec
			}
		}
	}
	for _, ref := range rd.sharedRefs {
		if rid, _ := ItemResponse(ref); byResp[rid] == nil {
			delete(rd.items, ref) // its response is gone from Redis
		}
	}
	for _, ref := range rd.missing {
		rid, _ := ItemResponse(ref)
		if rec := byResp[rid]; rec != nil {
			if it, ok := rec.item(ref); ok {
				if rd.items == nil {
					rd.items = make(map[string]wire.Item)
				}
				rd.items[ref] = it
			}
		}
	}
	return Lookup{Chain: oldestFirst(rd.chain), Items: rd.items}, nil
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

// Get implements Store. The local copy answers while it is this node's
// own (not yet written, or kept only here); once written, Redis is the
// authority, so a response deleted or evicted through another node is
// gone here too (SPEC 10.1). With Redis down the local copy answers.
func (r *Redis) Get(ctx context.Context, team, id string) (*Record, error) {
	own, shared := r.local.lookup(team, id)
	if own != nil && !shared {
		return own, nil
	}
	cctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	var cmd *redis.SliceCmd
	if _, err := r.c.Pipelined(cctx, func(p redis.Pipeliner) error {
		cmd = p.HMGet(cctx, r.recKey(team, id), "r", "s", "z")
		return nil
	}); err != nil {
		if own != nil {
			return own, nil
		}
		return nil, ErrUnavailable
	}
	v := cmd.Val()
	if len(v) != 3 || str(v[2]) == "" {
		if own != nil {
			r.local.drop(team, own)
		}
		return nil, ErrNotFound
	}
	if own != nil {
		return own, nil
	}
	return &Record{ID: id, Response: json.RawMessage(str(v[0])), Session: str(v[1])}, nil
}

// Input implements Store, with Get's authority: this node's own copy
// while Redis has not been written, else Redis (with Redis down, the local
// copy answers).
func (r *Redis) Input(ctx context.Context, team, id string) ([]wire.Item, error) {
	own, shared := r.local.lookup(team, id)
	if own != nil && !shared {
		return own.Input, nil
	}
	cctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	var cmd *redis.SliceCmd
	if _, err := r.c.Pipelined(cctx, func(p redis.Pipeliner) error {
		cmd = p.HMGet(cctx, r.recKey(team, id), "i", "z")
		return nil
	}); err != nil {
		if own != nil {
			return own.Input, nil
		}
		return nil, ErrUnavailable
	}
	v := cmd.Val()
	if len(v) != 2 || str(v[1]) == "" {
		if own != nil {
			r.local.drop(team, own)
		}
		return nil, ErrNotFound
	}
	if own != nil {
		return own.Input, nil
	}
	var in []wire.Item
	if i := str(v[0]); i != "" && json.Unmarshal([]byte(i), &in) != nil {
		return nil, ErrNotFound // unreadable: as good as gone (as Load treats it)
	}
	return in, nil
}

// Delete implements Store: the response's own record, here and in Redis;
// the turns it links to and the items it referenced stay. A record of this
// node not yet written may be in the writer's queue or in flight: the
// writer is also handed the delete, which it runs after the writes queued
// before it, so the write never outlives the delete. The request does not
// wait for the writer (a full queue drops the hand-over, logged).
func (r *Redis) Delete(ctx context.Context, team, id string) (bool, error) {
	here, shared := r.local.remove(team, id)
	if here && !shared && !r.closing.Load() {
		select {
		case r.queue <- job{team: team, del: id}:
		default:
			r.log.Warn("response store queue full: a delete not handed to the writer; the response may come back if its write was still queued", "response_id", id)
		}
	}
	cctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	n, err := deleteScript.Run(cctx, r.c, r.deleteKeys(team, id), id).Int()
	if err != nil {
		return false, ErrUnavailable
	}
	return here || n == 1, nil
}

// deleteKeys are deleteScript's keys for team's response id.
func (r *Redis) deleteKeys(team, id string) []string {
	return []string{r.recKey(team, id), r.indexKey(team), r.teamKey(team)}
}

// Flush waits until every record saved before it was written (or ctx ends).
func (r *Redis) Flush(ctx context.Context) error {
	ch := make(chan struct{})
	select {
	case r.queue <- job{flush: ch}:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close implements Store: it stops taking records and writes the queued
// ones until ctx ends.
func (r *Redis) Close(ctx context.Context) error {
	if r.closing.Swap(true) {
		return nil
	}
	err := r.Flush(ctx)
	close(r.stop) // the queue stays open: a Save racing Close must not panic
	select {
	case <-r.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	return err
}

// run is the one writer: it takes what is queued (up to 64 records) and
// writes it in one pipeline.
func (r *Redis) run() {
	defer close(r.done)
	batch := make([]job, 0, 64)
	for {
		var j job
		select {
		case j = <-r.queue:
		case <-r.stop:
			return
		}
		batch = append(batch[:0], j)
	more:
		for len(batch) < cap(batch) {
			select {
			case j := <-r.queue:
				batch = append(batch, j)
			default:
				break more
			}
		}
		r.write(batch)
	}
}

func (r *Redis) write(batch []job) {
	ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	defer cancel()
	calls := make([]redisscript.Call, 0, len(batch))
	written := make([]job, 0, len(batch)) // the job of each call
	for _, j := range batch {
		if j.rec == nil {
			continue
		}
		in, err1 := json.Marshal(j.rec.Input)
		out, err2 := json.Marshal(j.rec.Output)
		if err1 != nil || err2 != nil {
			continue
		}
		rec := j.rec
		size := int64(recordOverhead + len(rec.ID) + len(rec.Prev) + len(rec.Session) + len(in) + len(out) + len(rec.Response))
		calls = append(calls, redisscript.Call{
			Keys: []string{r.recKey(j.team, rec.ID), r.indexKey(j.team), r.teamKey(j.team)},
			Args: []any{rec.ID, rec.Prev, rec.Session, in, out, []byte(rec.Response), r.ttl.Milliseconds(), r.maxBytes, r.recBase(j.team), size},
		})
		written = append(written, j)
	}
	if len(calls) > 0 {
		failed := 0
		var last error
		for i, cmd := range redisscript.EvalPipelined(ctx, r.c, saveScript, calls) {
			if n, err := cmd.Int64(); err != nil {
				failed++
				last = err
			} else if n == 0 {
				r.log.Warn("response larger than responses.max_team_bytes: kept on this node only", "response_id", calls[i].Args[0], "bytes", calls[i].Args[9])
			} else {
				r.local.markShared(written[i].team, written[i].rec)
			}
		}
		if failed > 0 {
			r.log.Warn("response store write failed: responses kept on this node only", "responses", failed, "error", last)
		}
	}
	// deletes handed over by Delete, after the writes queued before them
	var dels []redisscript.Call
	for _, j := range batch {
		if j.del != "" {
			dels = append(dels, redisscript.Call{Keys: r.deleteKeys(j.team, j.del), Args: []any{j.del}})
		}
	}
	if len(dels) > 0 {
		for _, cmd := range redisscript.EvalPipelined(ctx, r.c, deleteScript, dels) {
			if err := cmd.Err(); err != nil {
				r.log.Warn("response store delete failed: a deleted response may still be in Redis until its TTL", "error", err)
				break
			}
		}
	}
	for _, j := range batch {
		if j.flush != nil {
			close(j.flush)
		}
	}
}

// saveLua stores one turn and trims the team to its byte share, oldest
// first. The evicted turns' keys are derived from ARGV[9]; they carry the
// team's hash tag, so they are in the slot of KEYS.
//
//	KEYS: 1 record hash, 2 team index, 3 team hash
//	ARGV: 1 id, 2 prev, 3 session, 4 input, 5 output, 6 response,
//	      7 ttl ms, 8 max team bytes, 9 record key base, 10 size
var saveScript = redis.NewScript(`
local id, size, maxb = ARGV[1], tonumber(ARGV[10]), tonumber(ARGV[8])
local old = redis.call('HGET', KEYS[1], 'z')
if old then
  redis.call('DEL', KEYS[1])
  redis.call('ZREM', KEYS[2], id .. ':' .. old)
  redis.call('HINCRBY', KEYS[3], 'b', -tonumber(old))
end
if size > maxb then return 0 end
redis.call('HSET', KEYS[1], 'p', ARGV[2], 's', ARGV[3], 'i', ARGV[4], 'o', ARGV[5], 'r', ARGV[6], 'z', size)
redis.call('PEXPIRE', KEYS[1], ARGV[7])
local q = redis.call('HINCRBY', KEYS[3], 'q', 1)
redis.call('ZADD', KEYS[2], q, id .. ':' .. size)
local b = redis.call('HINCRBY', KEYS[3], 'b', size)
local n = 1
while b > maxb do
  local m = redis.call('ZRANGE', KEYS[2], 0, 0)[1]
  if not m then break end
  redis.call('ZREM', KEYS[2], m)
  local mid, msize = string.match(m, '^(.*):(%d+)$')
  redis.call('DEL', ARGV[9] .. mid)
  b = redis.call('HINCRBY', KEYS[3], 'b', -tonumber(msize))
  n = n + 1
end
redis.call('PEXPIRE', KEYS[2], ARGV[7])
redis.call('PEXPIRE', KEYS[3], ARGV[7])
return n
`)

// deleteLua removes one turn and its accounting.
//
//	KEYS: 1 record hash, 2 team index, 3 team hash   ARGV: 1 id
var deleteScript = redis.NewScript(`
local z = redis.call('HGET', KEYS[1], 'z')
if not z then return 0 end
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1] .. ':' .. z)
redis.call('HINCRBY', KEYS[3], 'b', -tonumber(z))
return 1
`)

// loadLua walks a chain back from ARGV[2] and reads the outputs of the
// responses ARGV[5..] in one call, counting the stored JSON it would
// return against ARGV[3] before reading it. The keys read are derived from
// ARGV[1] under the team's hash tag, in the slot of KEYS[1].
//
//	KEYS: 1 team hash (routing only)
//	ARGV: 1 record key base, 2 first id ("" for none), 3 byte guard,
//	      4 max depth, 5 k, 6..5+k ids of turns the caller holds that
//	      must still be stored, 6+k.. response ids of referenced items
//	returns {1, id} a missing turn, {2, id} over the guard, {3, id} too
//	deep, else {0, n, (id, prev, session, input, output) x n,
//	(id, output or "") per referenced response}
var loadScript = redis.NewScript(`
local base, guard, depth = ARGV[1], tonumber(ARGV[3]), tonumber(ARGV[4])
local held = tonumber(ARGV[5])
for k = 6, 5 + held do
  if redis.call('EXISTS', base .. ARGV[k]) == 0 then return {1, ARGV[k]} end
end
local out = {0, 0}
local used, n = 0, 0
local id = ARGV[2]
while id ~= '' do
  local key = base .. id
  local p = redis.call('HGET', key, 'p')
  if not p then return {1, id} end
  n = n + 1
  if n > depth then return {3, id} end
  used = used + redis.call('HSTRLEN', key, 'i') + redis.call('HSTRLEN', key, 'o')
  if used > guard then return {2, id} end
  local h = redis.call('HMGET', key, 's', 'i', 'o')
  out[#out + 1] = id
  out[#out + 1] = p
  out[#out + 1] = h[1] or ''
  out[#out + 1] = h[2] or ''
  out[#out + 1] = h[3] or ''
  id = p
end
out[2] = n
for k = 6 + held, #ARGV do
  local key = base .. ARGV[k]
  local len = redis.call('HSTRLEN', key, 'o')
  used = used + len
  if used > guard then return {2, ARGV[k]} end
  out[#out + 1] = ARGV[k]
  if len > 0 then
    out[#out + 1] = redis.call('HGET', key, 'o')
  else
    out[#out + 1] = ''
  end
end
return out
`)

var _ Store = (*Redis)(nil)
