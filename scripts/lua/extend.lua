-- Extend a lock's lease only if the caller still owns it.
-- KEYS[1]: lock key; ARGV[1]: owner id; ARGV[2]: new TTL in milliseconds.
-- Returns 1 if extended, 0 if the lock is gone or held by someone else.
-- redis-cli --eval scripts/lua/extend.lua lock:job , pod-1 30000
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('pexpire', KEYS[1], ARGV[2])
end
return 0
