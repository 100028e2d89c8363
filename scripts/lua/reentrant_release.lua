-- Re-entrant hash lock release: KEYS[1] lock, KEYS[2] release channel,
-- ARGV[1] lease ms, ARGV[2] holder id. Returns nil when this holder does
-- not hold it, 0 when still held (re-entered), 1 when released (and the
-- release is published for waiters).
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
    return nil
end
local count = redis.call('hincrby', KEYS[1], ARGV[2], -1)
if count > 0 then
    redis.call('pexpire', KEYS[1], ARGV[1])
    return 0
end
redis.call('del', KEYS[1])
redis.call('publish', KEYS[2], 'released')
return 1
