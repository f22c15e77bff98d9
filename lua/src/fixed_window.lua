-- fixed_window.lua: fixed-window decisions, exactly core.FixedWindow.Step.
--
-- KEYS     one or more keys (all in one cluster slot), each decided in turn with the same
--          ARGV, as if requested one after the other at now; KEYS[i]:
--          a string '<start>:<count>' (the current window's start in µs since the Unix
--          epoch, and the cost admitted in it); absent for a new key
-- ARGV[1]  now: µs since the Unix epoch in [0, MAX_TIME], or '' to read the server's TIME
-- ARGV[2]  cost n, in [1, limit]
-- ARGV[3]  window W (µs); windows are aligned to multiples of W since the epoch
-- ARGV[4]  limit L
-- ARGV[5]  expiry margin (ms): the key expires this long after its window ended
--
-- Semantics (core): a request at now counts against the window of eff = max(now, start),
-- so a request from before the stored window counts against the stored window. A denial
-- writes nothing.
--
-- Reply: 6 integers per key, in KEYS order: allowed (1|0), limit, remaining,
--        retry_after (µs), reset_after (µs), delay (µs) (always 0)
-- Errors: 'ERR fixed_window: ...' for malformed arguments; 'ERR fixed_window: foreign state: key ...' for a
--         key holding state this script cannot read (lib/decided.lua).

--@include lib/prelude.lua
--@include lib/window_args.lua
--@include lib/math.lua
--@include lib/expire.lua
--@include algo/fixed_window.lua

-- lib/single.lua decides each key with decide(key, a1, a2, a3, a4).
local decide, a1, a2, a3, a4 = fixed_window, window, limit, nil, nil
--@include lib/single.lua
