-- carried.lua: the seeding step of a limit change that keeps state, shared by carry.lua and
-- reserve.lua. Needs now, margin, lib/expire.lua, lib/seed.lua and algorithm_seed (the
-- --@seeds directive), and the layout of carry.lua: KEYS[i] the state of limit i and
-- KEYS[m + i] the state of its previous limit (i = 1..m); ARGV[4*i .. 4*i+3] limit i,
-- ARGV[4*m + 4] the strategy ('as-is' or 'proportional'), ARGV[4*m + 4*i + 1 .. 4*m + 4*i + 4]
-- limit i's previous limit ('' and three '0' when limit i has none).

-- carry_check returns an error reply for an unknown strategy or a malformed previous limit
-- (checked before anything is written), or nil and whether the strategy is proportional.
local function carry_check(m)
  local s = ARGV[4 * m + 4]
  if s ~= 'proportional' and s ~= 'as-is' then return redis.error_reply('ERR {{script}}: unknown strategy') end
  for i = 1, m do
    local a, b = 4 * i, 4 * m + 4 * i + 1
    if ARGV[b] ~= '' and (ARGV[b] ~= ARGV[a] or not tonumber(ARGV[b + 1]) or not tonumber(ARGV[b + 2]) or not tonumber(ARGV[b + 3])) then
      return redis.error_reply('ERR {{script}}: bad previous limit')
    end
  end
  return nil, s == 'proportional'
end

-- carry_seed seeds each limit whose key does not exist from its previous limit's key, when
-- that holds state (core.Limit.SeedState), once: a marker (the key's name .. ':carried', in
-- its slot) lives as long as the previous key did when it seeded, so that a key that
-- expires or is refunded to full afterwards is not seeded again from consumption it already
-- carried (as the in-process successor, which holds the key, never seeds twice). The
-- previous key is left as it is (processes still deciding with the previous limits keep
-- counting there) and expires on its own; one in a format of no algorithm seeds nothing.
local function carry_seed(m, prop)
  for i = 1, m do
    local a, b = 4 * i, 4 * m + 4 * i + 1
    local roles = algorithm_seed(ARGV[a])
    local mark = KEYS[i] .. ':carried'
    if ARGV[b] ~= '' and roles ~= '' and redis.call('EXISTS', KEYS[i]) == 0 and redis.call('EXISTS', mark) == 0 then
      local old = KEYS[m + i]
      local got = redis.pcall('GET', old)
      if type(got) == 'string' then
        local left = redis.call('PTTL', old)
        if left > 0 then redis.call('SET', mark, '1', 'PX', fmt('%d', left)) end
        local v, held = seed(roles, got, prop, tonumber(ARGV[b + 1]), tonumber(ARGV[b + 2]), tonumber(ARGV[b + 3]),
          tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3]))
        if v and held then
          if roles == 'd' then
            redis.call('SET', KEYS[i], v, 'PX', pexpire(tonumber(v) - now))
          else
            local ttl = redis.call('PTTL', old)
            if ttl > 0 then redis.call('SET', KEYS[i], v, 'PX', fmt('%d', ttl)) end
          end
        end
      end
    end
  end
end
