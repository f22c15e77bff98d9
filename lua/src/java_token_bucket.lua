-- java_token_bucket.lua: the Java implementation's Redis token bucket
-- (RedisTokenBucketRateLimiter), decided in its own layout and arithmetic, so that Go and
-- Java processes share one limit: tokens refill at rate per second for the milliseconds
-- elapsed since ts, up to capacity (a new key starts full); a request of cost n is admitted
-- iff at least n tokens are there, and then takes them. A denial writes nothing. Time is
-- whole milliseconds, as the Java side writes it (now is truncated to the millisecond); ts
-- never moves back, so a client whose clock is behind never refills twice.
--
-- KEYS     one or more keys (all in one cluster slot), each decided in turn with the same
--          ARGV, as if requested one after the other at now; KEYS[i]:
--          a hash '<prefix>:{<key>}:tb' with fields tokens (a decimal number, possibly
--          fractional) and ts (ms since the Unix epoch); absent for a new key
-- ARGV[1]  now: µs since the Unix epoch in [0, MAX_TIME], or '' to read the server's TIME
-- ARGV[2]  cost n, in [1, limit]
-- ARGV[3]  capacity (a decimal number, >= 1)
-- ARGV[4]  rate (tokens per second, a decimal number, > 0)
-- ARGV[5]  limit: the whole tokens of a full bucket, the decisions' limit
-- ARGV[6]  the key's TTL (ms) after an admission: max(2000, two full refills), the Java side's
--
-- Floating point is the Java layout's own: tokens are stored as '%.17g' (read back exactly);
-- every integer of the reply is rounded (remaining down, times up), never a fraction.
--
-- Reply: 6 integers per key, in KEYS order: allowed (1|0), limit, remaining,
--        retry_after (µs), reset_after (µs), delay (µs) (always 0)
-- Errors: 'ERR java_token_bucket: ...' for malformed arguments; 'ERR java_token_bucket:
--         foreign state: key ...' for a key that is not a hash of numeric tokens and ts
--         (lib/guard.lua).

--@include lib/prelude.lua
--@include lib/math.lua
local n, capacity, rate, limit = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
if not capacity or capacity < 1 or not rate or rate <= 0 or not limit or not n or n < 1 or n > limit then
  return redis.error_reply('ERR java_token_bucket: bad arguments')
end
local ttl = ARGV[6]
local nowms = quo(now, MICROS_PER_MILLI)
--@include lib/guard.lua

-- up is x rounded up, down x rounded down, for x >= 0.
local function down(x) return x - fmod(x, 1) end
local function up(x)
  local d = down(x)
  if d < x then d = d + 1 end
  return d
end

-- after returns the time (µs from now) at which a bucket holding tokens at ts (ms) holds
-- target: the first whole millisecond e after ts at which the Java arithmetic,
-- tokens + e * rate / 1000, reaches it (the quotient's rounding corrected both ways).
local function after(ts, tokens, target)
  if tokens >= target then return 0 end
  local e = up((target - tokens) * 1000 / rate)
  if e > 1 and tokens + (e - 1) * rate / 1000 >= target then e = e - 1 end
  if tokens + e * rate / 1000 < target then e = e + 1 end
  local at = (ts + e) * MICROS_PER_MILLI - now
  if at < 0 then at = 0 end
  return at
end

-- read returns the key's tokens and ts, a new key's when absent.
local function read(key)
  local v = redis.call('HMGET', key, 'tokens', 'ts')
  if not v[1] and not v[2] then return capacity, nowms end
  local tokens, ts = tonumber(v[1]), tonumber(v[2])
  if not tokens or not ts or tokens ~= tokens or ts < 0 or ts > quo(MAX_TIME, MICROS_PER_MILLI) then
    error('tokens and ts are not numbers')
  end
  return tokens, ts
end

local out, single = {}, #KEYS == 1
for i = 1, #KEYS do
  local key = KEYS[i]
  local ok, tokens, ts = guard(read, key)
  if not ok then return tokens end
  if nowms > ts then
    tokens = tokens + (nowms - ts) * rate / 1000
    ts = nowms
  end
  if tokens > capacity then tokens = capacity end
  if tokens < 0 then tokens = 0 end
  local d
  if tokens >= n then
    tokens = tokens - n
    d = {1, limit, down(tokens), 0, after(ts, tokens, capacity), 0}
  else
    d = {0, limit, down(tokens), after(ts, tokens, n), after(ts, tokens, capacity), 0}
  end
  if not sane(d) then return foreign(key, 'a decision out of range') end
  if d[1] == 1 then
    redis.call('HSET', key, 'tokens', fmt('%.17g', tokens), 'ts', fmt('%d', ts))
    redis.call('PEXPIRE', key, ttl)
  end
  if single then return d end
  for j = 1, 6 do out[#out + 1] = d[j] end
end
return out
