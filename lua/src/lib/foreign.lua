-- foreign.lua: the error reply for foreign state. foreign(key, err) names the key, what it
-- holds (its type and a sample of its contents) and err, the failure reading it (a Lua error
-- or a Redis error reply), in one line: 'ERR <script>: foreign state: key ... holds ...'.
-- Needs fmt (lib/math.lua). Included by lib/guard.lua and lib/decided.lua.

-- foreign returns the error reply for key, which f failed to read with err. Its helpers are
-- local to it, so that a script pays for them only on this error path (a function statement
-- at the script's top level allocates a closure on every call of the script).
local function foreign(key, err)
  -- quote returns the first 64 bytes of s in double quotes, '"' and '\' escaped and other
  -- bytes than printable ASCII as \xHH, so that an error reply stays one line.
  local function quote(s)
    local q = string.gsub(string.sub(s, 1, 64), '["\\]', '\\%0')
    q = string.gsub(q, '[^ -~]', function(c) return fmt('\\x%02x', string.byte(c)) end)
    if #s > 64 then q = q .. '...' end
    return '"' .. q .. '"'
  end
  -- describe returns what key holds, briefly: its type and a sample of its contents.
  local function describe()
    local t = redis.call('TYPE', key)['ok']
    if t == 'string' then
      return 'a string ' .. quote(redis.call('GETRANGE', key, 0, 64))
    elseif t == 'zset' then
      local e = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
      return fmt('a sorted set of %d members (highest score %s, member %s)', redis.call('ZCARD', key), e[2] or '', quote(e[1] or ''))
    elseif t == 'hash' then
      local s = redis.call('HSCAN', key, '0', 'COUNT', '8')[2]
      local names = {}
      for i = 1, #s, 2 do names[#names + 1] = quote(s[i]) end
      return fmt('a hash with fields %s', table.concat(names, ', '))
    end
    return 'a ' .. t
  end
  if type(err) == 'table' then err = err.err or err.ok or '?' end
  return redis.error_reply(fmt('ERR {{script}}: foreign state: key %s holds %s, which this script cannot read (%s)',
    quote(key), describe(), (string.gsub(err, '^[%w_@]*:%d+: ', ''))))
end
