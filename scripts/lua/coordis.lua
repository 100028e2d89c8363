#!lua name=coordis
-- The canonical scripts of this folder as one Redis 7 function library,
-- kept by the server (FUNCTION LOAD survives SCRIPT FLUSH) and called with
-- FCALL. Each body is its script's code, word for word (client-tests check
-- it); `KEYS` and `ARGV` are the callback's parameters.
--
--   redis-cli FUNCTION LOAD REPLACE "$(cat scripts/lua/coordis.lua)"
--   redis-cli FCALL coordis_acquire 1 lock:job pod-1 30000
--   redis-cli FCALL coordis_unlock 1 lock:job pod-1

-- Take a lock: KEYS[1] lock key; ARGV[1] owner id; ARGV[2] TTL in ms.
-- Returns 1 if taken, 0 if someone holds it.
redis.register_function('coordis_acquire', function(KEYS, ARGV)
  if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
    return 1
  end
  return 0
end)

-- unlock.lua
redis.register_function('coordis_unlock', function(KEYS, ARGV)
  if redis.call('get', KEYS[1]) == ARGV[1] then
    return redis.call('del', KEYS[1])
  end
  return 0
end)

-- extend.lua
redis.register_function('coordis_extend', function(KEYS, ARGV)
  if redis.call('get', KEYS[1]) == ARGV[1] then
    return redis.call('pexpire', KEYS[1], ARGV[2])
  end
  return 0
end)

-- fenced_acquire.lua
redis.register_function('coordis_fenced_acquire', function(KEYS, ARGV)
  if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
    return redis.call('incr', KEYS[2])
  end
  return false
end)

-- semaphore_acquire.lua
redis.register_function('coordis_semaphore_acquire', function(KEYS, ARGV)
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
end)

-- semaphore_release.lua
redis.register_function('coordis_semaphore_release', function(KEYS, ARGV)
  return redis.call('zrem', KEYS[1], ARGV[1])
end)
