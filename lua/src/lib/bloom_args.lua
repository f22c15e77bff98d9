-- bloom_args.lua: the arguments of the Bloom scripts: ARGV[1] k, then k positions per
-- element; key is the shard (KEYS[1]), out the reply being built.
local k = tonumber(ARGV[1])
if not k or k < 1 or k == math.huge or math.fmod(#ARGV - 1, k) ~= 0 then
  return redis.error_reply('ERR {{script}}: bad arguments')
end
local key, out = KEYS[1], {}
