-- ZSET semaphore: drop expired holders, then take a permit if fewer than
-- the limit hold one. Scores are acquisition times in milliseconds.
-- KEYS[1]: semaphore key; ARGV[1]: holder id; ARGV[2]: limit;
-- ARGV[3]: lease in ms; ARGV[4]: now in ms (the caller's clock).
-- Returns 1 if acquired (or already held: refreshed), 0 if full.
-- redis-cli --eval scripts/lua/semaphore_acquire.lua sem:db , worker-7 3 10000 1700000000000
local now = tonumber(ARGV[4])
redis.call('zremrangebyscore', KEYS[1], '-inf', now - tonumber(ARGV[3]))
if redis.call('zscore', KEYS[1], ARGV[1]) then
  redis.call('zadd', KEYS[1], now, ARGV[1])
  return 1
end
if redis.call('zcard', KEYS[1]) < tonumber(ARGV[2]) then
  redis.call('zadd', KEYS[1], now, ARGV[1])
  redis.call('pexpire', KEYS[1], ARGV[3])
  return 1
end
return 0
