-- Re-entrant (Redisson-style) hash lock: KEYS[1] lock, ARGV[1] lease ms,
-- ARGV[2] holder id. Returns nil when taken (or re-entered), else the
-- lock's remaining lease in ms.
if redis.call('exists', KEYS[1]) == 0 or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return nil
end
return redis.call('pttl', KEYS[1])
