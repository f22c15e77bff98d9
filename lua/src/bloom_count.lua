-- bloom_count.lua: the inputs of a Bloom filter shard's approximate count, read-only
-- (EVALSHA_RO). The client turns them into an estimate with core.Bloom.EstimateCount
-- (Swamidass & Baldi: -(m/k) ln(1 - X/m)), which needs floating point and so stays out of Lua.
--
-- KEYS[1]  string: the shard's bits
-- ARGV[]   none
--
-- Reply: {X, bytes}: X the number of set bits (BITCOUNT), bytes the string's length (STRLEN)
-- Errors: 'ERR bloom_count: foreign state: key ...' for a key that is not a string.

--@readonly
--@include lib/math.lua
--@include lib/guard.lua
local function count(key) return {redis.call('BITCOUNT', key), redis.call('STRLEN', key)} end
local ok, r = guard(count, KEYS[1])
return r
