-- Acquire a lock and a fencing token in one step: the token grows by one on
-- every successful acquisition, so a stale holder's writes can be refused.
-- KEYS[1]: lock key; KEYS[2]: token counter key; ARGV[1]: owner id;
-- ARGV[2]: TTL in milliseconds. Returns the token, or nil if the lock is held.
-- redis-cli --eval scripts/lua/fenced_acquire.lua lock:job lock:job:token , pod-1 30000
if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return redis.call('incr', KEYS[2])
end
return false
