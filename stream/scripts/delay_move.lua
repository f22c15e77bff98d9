-- delay_move.lua: move the due scheduled messages of a topic into its stream, in one atomic
-- step: for each message whose due time has come by the server's clock (TIME), XADD its
-- entry to the stream, then delete it from the schedule and the hash. A message is thus
-- either still scheduled or in the stream, never both and never neither; a failing XADD
-- (out of memory) stops the script before that message's deletion, so it stays scheduled.
-- Messages due at the same millisecond move in id order (the order they were scheduled in
-- by one producer). An encoded entry that cannot be decoded (not written by this package's
-- producer) goes to the topic's dead-letter stream as the field "payload", with dl_error
-- saying why; an id without an entry is dropped from the schedule and counted. A message
-- sent with a unique id (xadd_unique.lua) has a link to it: its record then names the new
-- entry, so that the id stays taken until the entry is acknowledged.
--
-- KEYS[1]  the topic's schedule (sorted set: id -> due time in ms)
-- KEYS[2]  the topic's scheduled messages (hash: id -> encoded entry)
-- KEYS[3]  the topic stream
-- KEYS[4]  its dead-letter stream
-- KEYS[5]  the topic's unique records (hash: unique id -> record, see xadd_unique.lua)
-- KEYS[6]  the links of scheduled messages to their unique id (hash: schedule id -> id)
--          (all six keys share one hash tag)
-- ARGV[1]  most messages moved by this call
-- ARGV[2]  most field names and values of one entry (larger ones are undecodable)
--
-- Reply: {moved, wait, left, invalid, missing}
--   moved    messages moved into the stream
--   wait     ms until the next scheduled message is due (0: due now, more to move; -1: none)
--   left     messages still scheduled
--   invalid  undecodable entries moved to the dead-letter stream
--   missing  ids whose entry was gone, dropped
local sched, msgs, stream, dlq, recs, links = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local limit = tonumber(ARGV[1])
local maxfields = tonumber(ARGV[2])
local t = redis.call('TIME')
local usec = tonumber(t[2])
local now = tonumber(t[1]) * 1000 + (usec - math.fmod(usec, 1000)) / 1000

-- decode returns the field names and values of an encoded entry, or nil when it is invalid.
local function decode(s)
  local out, pos, n = {}, 1, #s
  while pos <= n do
    local colon = string.find(s, ':', pos, true)
    if not colon or colon == pos or colon - pos > 12 then
      return nil
    end
    local digits = string.sub(s, pos, colon - 1)
    if not string.find(digits, '^%d+$') then
      return nil
    end
    local len = tonumber(digits)
    if colon + len > n then
      return nil
    end
    out[#out + 1] = string.sub(s, colon + 1, colon + len)
    if #out > maxfields then
      return nil
    end
    pos = colon + 1 + len
  end
  if #out == 0 or math.fmod(#out, 2) ~= 0 then
    return nil
  end
  return out
end

local ids = redis.call('ZRANGEBYSCORE', sched, '-inf', string.format('%d', now), 'LIMIT', 0, string.format('%d', limit))
local moved, invalid, missing = 0, 0, 0
for _, id in ipairs(ids) do
  local enc = redis.call('HGET', msgs, id)
  if not enc then
    missing = missing + 1
  else
    local fields = decode(enc)
    if fields then
      local nid = redis.call('XADD', stream, '*', unpack(fields))
      local u = redis.call('HGET', links, id)
      if u and redis.call('HGET', recs, u) == 's|' .. id then
        redis.call('HSET', recs, u, 'e|' .. nid)
      end
      moved = moved + 1
    else
      redis.call('XADD', dlq, '*', 'payload', enc, 'dl_id', id, 'dl_group', '', 'dl_consumer', '',
        'dl_deliveries', '0', 'dl_error', 'delayed: undecodable scheduled entry',
        'dl_ts', string.format('%d', now))
      invalid = invalid + 1
    end
    redis.call('HDEL', msgs, id)
  end
  redis.call('HDEL', links, id)
  redis.call('ZREM', sched, id)
end
local wait = -1
local first = redis.call('ZRANGE', sched, 0, 0, 'WITHSCORES')
if #first == 2 then
  wait = tonumber(first[2]) - now
  if wait < 0 then
    wait = 0
  end
end
return {moved, wait, redis.call('ZCARD', sched), invalid, missing}
