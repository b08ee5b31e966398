package fleet

import "github.com/redis/go-redis/v9"

// The shared state lives in one hash per fleet key, with its trips, its
// members' generations and its probe leases beside it, all four keys under
// one hash tag so that Redis Cluster and Valkey put them in one slot. Every
// change is a server-side script: atomic, and timed by the server's clock
// (TIME), never by a member's. Each script returns the state as strings:
// incarnation, version, "open" or "closed", the open deadline and the
// server's time (milliseconds since the Unix epoch), then its own fields.
//
// The hash's fields: inc names this incarnation of the state (a Redis that
// restarted empty makes a new one, so that members do not ignore its
// versions as older than what they saw), v is the version (+1 on every
// change, published on the channel), s and until the state, used the
// probes that reported in this half-open period, succ and fail their
// verdicts so far.
const luaPrelude = `
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function init(k)
  if redis.call('EXISTS', k) == 0 then
    local t = redis.call('TIME')
    redis.call('HSET', k, 'inc', t[1] .. '.' .. t[2], 'v', 0, 's', 'closed', 'until', 0, 'used', 0, 'succ', 0, 'fail', 0)
  end
end
local function state(k, now)
  local h = redis.call('HMGET', k, 'inc', 'v', 's', 'until')
  return {h[1], h[2], h[3], h[4], tostring(now)}
end
local function set(k, lease, s, untilms, channel)
  local v = redis.call('HINCRBY', k, 'v', 1)
  redis.call('HSET', k, 's', s, 'until', untilms, 'used', 0, 'succ', 0, 'fail', 0)
  redis.call('DEL', lease)
  redis.call('PUBLISH', channel, v)
end
`

// readScript returns the state. KEYS: state.
var readScript = redis.NewScript(luaPrelude + `
init(KEYS[1])
return state(KEYS[1], now_ms())
`)

// tripScript records a member's trip, fenced by the breaker generation of
// the member's instance (a generation not above the last one recorded for
// that instance changes nothing, so a retried or late publish counts
// once; a member restarted under the same name is a new instance, whose
// generations start again), forgets trips older than the open duration,
// and opens the fleet once quorum distinct members tripped within it.
// KEYS: state, trips, generations, lease. ARGV: member, instance,
// generation, open duration (ms), quorum, channel.
var tripScript = redis.NewScript(luaPrelude + `
init(KEYS[1])
local now = now_ms()
local openms = tonumber(ARGV[4])
local instance = ARGV[1] .. '|' .. ARGV[2]
local last = tonumber(redis.call('HGET', KEYS[3], instance) or '-1')
if tonumber(ARGV[3]) > last then
  redis.call('HSET', KEYS[3], instance, ARGV[3])
  redis.call('ZADD', KEYS[2], now, ARGV[1])
end
redis.call('PEXPIRE', KEYS[3], 86400000)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. tostring(now - openms))
redis.call('PEXPIRE', KEYS[2], openms + 60000)
if redis.call('HGET', KEYS[1], 's') ~= 'open' and redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[5]) then
  set(KEYS[1], KEYS[4], 'open', now + openms, ARGV[6])
end
return state(KEYS[1], now)
`)

// leaseScript grants a probe lease of the open period whose version the
// member names, if fewer than the budget are held or used: a lease not
// reported within its time-to-live is dropped first (its holder is
// presumed dead), which returns its slot. It appends "1" and the TTL for
// a grant, "0" and how long until a held lease expires (at most the
// refusal wait) otherwise, and "0" "0" when the version is not the open
// one any more. KEYS: state, lease. ARGV: version, holder, budget, TTL
// (ms), refusal wait (ms).
var leaseScript = redis.NewScript(luaPrelude + `
init(KEYS[1])
local now = now_ms()
local st = state(KEYS[1], now)
if st[3] ~= 'open' or st[2] ~= ARGV[1] then
  st[6] = '0'; st[7] = '0'
  return st
end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local ttl = tonumber(ARGV[4])
local used = tonumber(redis.call('HGET', KEYS[1], 'used') or '0')
if redis.call('ZCARD', KEYS[2]) + used < tonumber(ARGV[3]) then
  redis.call('ZADD', KEYS[2], now + ttl, ARGV[2])
  redis.call('PEXPIRE', KEYS[2], ttl + 60000)
  st[6] = '1'; st[7] = tostring(ttl)
  return st
end
local wait = tonumber(ARGV[5])
local first = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
if first[2] and tonumber(first[2]) - now < wait then
  wait = tonumber(first[2]) - now
end
if wait < 1 then wait = 1 end
st[6] = '0'; st[7] = tostring(wait)
return st
`)

// doneScript reports a leased probe's outcome ("s" success, "f" failure,
// "i" ignored, which returns the slot) and publishes the fleet's verdict
// once the successes to close or the failures to re-open are in. A
// report for another version, or from a holder whose lease was dropped
// for its TTL, changes nothing: the verdict is fenced by the period.
// KEYS: state, trips, lease. ARGV: version, holder, outcome, successes to
// close, failures to re-open, open duration (ms), channel.
var doneScript = redis.NewScript(luaPrelude + `
init(KEYS[1])
local now = now_ms()
local st = state(KEYS[1], now)
if st[3] ~= 'open' or st[2] ~= ARGV[1] or redis.call('ZREM', KEYS[3], ARGV[2]) == 0 then
  return st
end
if ARGV[3] == 'i' then return st end
redis.call('HINCRBY', KEYS[1], 'used', 1)
if ARGV[3] == 'f' then
  if redis.call('HINCRBY', KEYS[1], 'fail', 1) >= tonumber(ARGV[5]) then
    set(KEYS[1], KEYS[3], 'open', now + tonumber(ARGV[6]), ARGV[7])
  end
elseif redis.call('HINCRBY', KEYS[1], 'succ', 1) >= tonumber(ARGV[4]) then
  set(KEYS[1], KEYS[3], 'closed', 0, ARGV[7])
  redis.call('DEL', KEYS[2])
end
return state(KEYS[1], now)
`)
