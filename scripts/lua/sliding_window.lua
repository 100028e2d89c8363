-- Sliding-window rate limiter on a list: KEYS[1] list of admitted times,
-- ARGV[1] now (ms), ARGV[2] window (ms), ARGV[3] limit. Returns 1 and
-- records the call when fewer than `limit` calls fell in the last window.
local limit = tonumber(ARGV[3])
if redis.call('llen', KEYS[1]) >= limit then
    local oldest = tonumber(redis.call('lindex', KEYS[1], -1))
    if tonumber(ARGV[1]) - oldest < tonumber(ARGV[2]) then
        return 0
    end
end
redis.call('lpush', KEYS[1], ARGV[1])
redis.call('ltrim', KEYS[1], 0, limit - 1)
redis.call('pexpire', KEYS[1], ARGV[2])
return 1
