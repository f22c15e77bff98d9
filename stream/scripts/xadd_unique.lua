-- xadd_unique.lua: send one message at most once per unique id and topic (Producer.Send with
-- WithUnique), in one atomic step: look the id up, then append the entry to the stream (or
-- schedule it), or refuse it as a duplicate, or (debounce) replace the scheduled message it
-- names and move its due time.
--
-- The records of a topic's unique ids are one hash (id -> "e|<entry id>" for an entry sent to
-- the stream, "s|<schedule id>" for a scheduled message), with their expiry times in a sorted
-- set, pruned a bounded number at a time by each new record. A scheduled message's record is turned into an
-- entry record by delay_move.lua when the message moves into the stream (the links hash tells
-- it which id a schedule id carries), so "until acknowledged" holds across the move.
--
-- KEYS[1]  the topic stream
-- KEYS[2]  the unique records (hash: id -> record)
-- KEYS[3]  their expiry times (sorted set: id -> ms since the Unix epoch)
-- KEYS[4]  the topic's schedule (sorted set: schedule id -> due time in ms)
-- KEYS[5]  the topic's scheduled messages (hash: schedule id -> encoded entry)
-- KEYS[6]  the links of scheduled messages to their unique id (hash: schedule id -> id)
--          (all six keys share one hash tag)
-- ARGV[1]  the unique id
-- ARGV[2]  mode: "acked" (a duplicate while the first message is unacknowledged), "ttl" (a
--          duplicate for ARGV[3] ms after the first send), "debounce" (a later send replaces
--          the scheduled message and moves its due time)
-- ARGV[3]  how long the record lives at most, in ms (the window of "ttl")
-- ARGV[4]  "0", or the approximate MAXLEN to trim the stream to on append (XADD MAXLEN ~)
-- ARGV[5]  "": append now; "rel": schedule ARGV[6] ms from now by the server's clock;
--          "abs": schedule at ARGV[6] ms since the Unix epoch
-- ARGV[6]  delay or due time, in ms (integer; ignored when ARGV[5] is "")
-- ARGV[7]  the new schedule id (ignored when ARGV[5] is "")
-- ARGV[8]  scheduled: the encoded entry ("<byte length>:<bytes>" per field name and value);
-- ARGV[8], ARGV[9], ...  appended now: the entry's field names and values
--
-- Reply: {status, id, due}
--   status  1 sent, 0 a duplicate (nothing written), 2 debounced (the scheduled message
--           replaced and its due time moved)
--   id      the entry id or schedule id of what was sent, or of the first message
--   due     the due time in ms of a scheduled or debounced message, as a decimal string; ""
local stream, recs, exps, sched, msgs, links = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local uid, mode = ARGV[1], ARGV[2]
local ttl = tonumber(ARGV[3])
local delay = ARGV[5]

local t = redis.call('TIME')
local usec = tonumber(t[2])
local now = tonumber(t[1]) * 1000 + (usec - math.fmod(usec, 1000)) / 1000


-- newer reports whether stream id a is after stream id b ("<ms>-<seq>").
local function newer(a, b)
  local da, db = string.find(a, '-', 1, true), string.find(b, '-', 1, true)
  local ma, mb = tonumber(string.sub(a, 1, da - 1)), tonumber(string.sub(b, 1, db - 1))
  if ma ~= mb then
    return ma > mb
  end
  return tonumber(string.sub(a, da + 1)) > tonumber(string.sub(b, db + 1))
end

-- unacked reports whether entry id is in the stream and not yet acknowledged by every
-- group: undelivered to one (after its last-delivered id) or pending in one. A stream
-- without groups has acknowledged nothing.
local function unacked(id)
  if redis.call('EXISTS', stream) == 0 or #redis.call('XRANGE', stream, id, id) == 0 then
    return false -- trimmed or deleted (DeleteOnAck): done with
  end
  local groups = redis.call('XINFO', 'GROUPS', stream)
  for _, g in ipairs(groups) do
    local name, last
    for i = 1, #g - 1, 2 do
      if g[i] == 'name' then
        name = g[i + 1]
      elseif g[i] == 'last-delivered-id' then
        last = g[i + 1]
      end
    end
    if newer(id, last) then
      return true
    end
    if #redis.call('XPENDING', stream, name, id, id, 1) > 0 then
      return true
    end
  end
  return #groups == 0
end

-- dueOf returns the due time of a scheduled message, in ms.
local function dueOf()
  local v = tonumber(ARGV[6])
  if delay == 'rel' then
    return now + v
  end
  return v
end

local rec = redis.call('HGET', recs, uid)
if rec then
  local exp = redis.call('ZSCORE', exps, uid)
  if not exp or tonumber(exp) <= now then -- expired, not pruned yet
    if string.sub(rec, 1, 2) == 's|' then
      redis.call('HDEL', links, string.sub(rec, 3))
    end
    redis.call('HDEL', recs, uid)
    redis.call('ZREM', exps, uid)
    rec = nil
  end
end
if rec then
  local kind, rid = string.sub(rec, 1, 2), string.sub(rec, 3)
  if kind == 's|' and redis.call('ZSCORE', sched, rid) then
    if mode ~= 'debounce' then
      return {0, rid, ''}
    end
    local dueMs = dueOf()
    local due = string.format('%d', dueMs)
    redis.call('HSET', msgs, rid, ARGV[8])
    redis.call('ZADD', sched, due, rid)
    redis.call('ZADD', exps, string.format('%d', math.max(now, dueMs) + ttl), uid)
    return {2, rid, due}
  end
  if kind == 'e|' then
    if mode == 'ttl' then
      return {0, rid, ''}
    end
    if unacked(rid) then
      return {0, rid, ''}
    end
  end
  if kind == 's|' then
    redis.call('HDEL', links, rid) -- cancelled: the link is stale
    if mode == 'ttl' then
      return {0, rid, ''}
    end
  end
end

-- A new record: first prune up to 64 expired ones (a bounded step per write keeps the hash
-- bounded; a duplicate writes nothing).
local old = redis.call('ZRANGEBYSCORE', exps, '-inf', string.format('%d', now), 'LIMIT', 0, 64)
for _, o in ipairs(old) do
  local r = redis.call('HGET', recs, o)
  if r and string.sub(r, 1, 2) == 's|' then
    redis.call('HDEL', links, string.sub(r, 3))
  end
  redis.call('HDEL', recs, o)
  redis.call('ZREM', exps, o)
end

if delay ~= '' then
  local sid = ARGV[7]
  local dueMs = dueOf()
  local due = string.format('%d', dueMs)
  local expires = string.format('%d', math.max(now, dueMs) + ttl) -- the record outlives the wait
  redis.call('HSET', msgs, sid, ARGV[8])
  redis.call('ZADD', sched, due, sid)
  redis.call('HSET', links, sid, uid)
  redis.call('HSET', recs, uid, 's|' .. sid)
  redis.call('ZADD', exps, expires, uid)
  return {1, sid, due}
end
local id
if ARGV[4] ~= '0' then
  id = redis.call('XADD', stream, 'MAXLEN', '~', ARGV[4], '*', unpack(ARGV, 8))
else
  id = redis.call('XADD', stream, '*', unpack(ARGV, 8))
end
redis.call('HSET', recs, uid, 'e|' .. id)
redis.call('ZADD', exps, string.format('%d', now + ttl), uid)
return {1, id, ''}
