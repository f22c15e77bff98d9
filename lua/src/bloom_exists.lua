-- bloom_exists.lua: Bloom filter membership of one or more elements on one shard, read-only
-- (EVALSHA_RO). Positions are computed by the client as for bloom_add.lua.
--
-- KEYS[1]  string: the shard's bits
-- ARGV[1]  k, the number of positions per element
-- ARGV[2..] k positions per element, element after element ('%d')
--
-- Reply: one integer per element: 1 if every bit is set (probably present), 0 if not
--        (certainly absent).
-- Errors: 'ERR bloom_exists: ...' for malformed arguments; 'ERR bloom_exists: foreign state:
--         key ...' for a key that is not a string (lib/guard.lua).

--@readonly
--@include lib/bloom_args.lua
--@include lib/math.lua
--@include lib/guard.lua
local function exists(shard)
  for i = 2, #ARGV, k do
    local all = 1
    for j = i, i + k - 1 do
      if redis.call('GETBIT', shard, ARGV[j]) == 0 then
        all = 0
        break
      end
    end
    out[#out + 1] = all
  end
  return out
end
local ok, r = guard(exists, key)
return r
