-- ZSET semaphore: give back a permit. KEYS[1]: semaphore key; ARGV[1]: holder id.
-- Returns 1 if the holder had a permit, 0 otherwise.
-- redis-cli --eval scripts/lua/semaphore_release.lua sem:db , worker-7
return redis.call('zrem', KEYS[1], ARGV[1])
