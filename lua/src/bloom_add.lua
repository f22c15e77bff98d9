-- bloom_add.lua: Bloom filter check-and-add of one or more elements on one shard, atomic:
-- an element is new iff setting its bits changed at least one of them, so two clients racing
-- on the same new element see exactly one "new". Bit positions are computed by the client
-- (core.Bloom.Locate: MurmurHash3 x64 128 double hashing); the server only touches bits.
--
-- KEYS[1]  string: the shard's bits (SETBIT offsets in [0, shard bits) <= 2^32)
-- ARGV[1]  k, the number of positions per element
-- ARGV[2..] k positions per element, element after element ('%d')
--
-- Reply: one integer per element: 1 if every bit was already set (a duplicate, or a false
--        positive), 0 if the element is new.
-- Errors: 'ERR bloom_add: ...' for malformed arguments; 'ERR bloom_add: foreign state: key
--         ...' for a key that is not a string (lib/guard.lua).

--@include lib/bloom_args.lua
--@include lib/math.lua
--@include lib/guard.lua
-- add sets the bits; on a key of another type the first SETBIT fails before any write.
local function add(shard)
  for i = 2, #ARGV, k do
    local dup = 1
    for j = i, i + k - 1 do
      if redis.call('SETBIT', shard, ARGV[j], 1) == 0 then dup = 0 end
    end
    out[#out + 1] = dup
  end
  return out
end
local ok, r = guard(add, key)
return r
