-- fire.lua: decide one tick of a schedule and, when no process decided a later tick than
-- the one this call planned from, send it: the tick is claimed and its entry XADDed in the
-- same script, so across every process that registered the schedule each tick is decided
-- once, and sent at most once.
--
-- KEYS[1]  the schedule's state (hash: last, paused, sent, caught_up, skipped)
-- KEYS[2]  the topic's schedules (hash: name -> definition; same hash tag)
-- KEYS[3]  the topic's stream (same hash tag)
-- ARGV[1]  the schedule's name
-- ARGV[2]  the tick the call was planned from, ms since the Unix epoch, in decimal: the
--          latest tick the caller knows decided (or the time it started, for a new schedule)
-- ARGV[3]  the tick, ms since the Unix epoch, in decimal (after ARGV[2])
-- ARGV[4]  ticks this call records as skipped (decimal, 0 or more): the ticks after ARGV[2]
--          and before ARGV[3] that the missed-tick policy drops, and the tick itself when
--          ARGV[5] is "0"
-- ARGV[5]  "0": only record the tick as decided; "1": send it on time; "2": send it late
--          (a missed tick the policy sends)
-- ARGV[6]  the position, within ARGV[7..], of the value set to the server's time in ms
--          (the entry's ts field)
-- ARGV[7..] the entry's fields, names and values alternately
--
-- Reply: {status, last, id}. status is "sent" (id is the new entry's id), "skipped" (the
-- tick and the drops are recorded), "taken" (a tick after ARGV[2] was decided before: the
-- caller plans again from last), "paused" (the tick is decided and nothing sent) or
-- "removed" (the schedule is not registered; nothing is written). last is the latest
-- decided tick.
if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 0 then
  return {'removed', '0', ''}
end
local last = redis.call('HGET', KEYS[1], 'last')
if last and tonumber(last) > tonumber(ARGV[2]) then
  return {'taken', last, ''}
end
redis.call('HSET', KEYS[1], 'last', ARGV[3])
if redis.call('HGET', KEYS[1], 'paused') == '1' then
  return {'paused', ARGV[3], ''}
end
if ARGV[4] ~= '0' then
  redis.call('HINCRBY', KEYS[1], 'skipped', ARGV[4])
end
if ARGV[5] == '0' then
  return {'skipped', ARGV[3], ''}
end
local fields = {}
for i = 7, #ARGV do
  fields[#fields + 1] = ARGV[i]
end
local t = redis.call('TIME')
fields[tonumber(ARGV[6])] = t[1] .. string.sub(string.format('%06d', tonumber(t[2])), 1, 3)
local id = redis.call('XADD', KEYS[3], '*', unpack(fields))
redis.call('HINCRBY', KEYS[1], 'sent', 1)
if ARGV[5] == '2' then
  redis.call('HINCRBY', KEYS[1], 'caught_up', 1)
end
return {'sent', ARGV[3], id}
