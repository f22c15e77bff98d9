-- sliding_counter.lua: sliding-window-counter decisions, exactly core.SlidingCounter.Step
-- (two aligned fixed windows, the previous one weighted by its remaining overlap).
--
-- KEYS     one or more keys (all in one cluster slot), each decided in turn with the same
--          ARGV, as if requested one after the other at now; KEYS[i]:
--          a string '<start>:<count>:<prev>' (the current window's start in µs since the
--          Unix epoch, the cost admitted in it, and the cost admitted in the window before
--          it); absent for a new key
-- ARGV[1]  now: µs since the Unix epoch in [0, MAX_TIME], or '' to read the server's TIME
-- ARGV[2]  cost n, in [1, limit]
-- ARGV[3]  window W (µs); windows are aligned to multiples of W since the epoch
-- ARGV[4]  limit L (L * W <= 2^53, so every product below is exact)
-- ARGV[5]  expiry margin (ms): the key expires this long after its estimate fell to zero
--
-- Semantics (core): at eff = max(now, start) the estimate is prev*(W-(eff-start))/W + count;
-- a request is admitted iff count+n <= L and prev*(W-(eff-start)) <= (L-count-n)*W. A
-- denial writes nothing (the state is not even moved to eff's window).
--
-- Reply: 6 integers per key, in KEYS order: allowed (1|0), limit, remaining,
--        retry_after (µs), reset_after (µs), delay (µs) (always 0)
-- Errors: 'ERR sliding_counter: ...' for malformed arguments.

--@include lib/prelude.lua
--@include lib/window_args.lua
--@include lib/math.lua
--@include lib/expire.lua
--@include algo/sliding_counter.lua

local function decide(key) return slidingcounter(key, window, limit) end
--@include lib/single.lua
