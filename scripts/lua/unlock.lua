-- Release a lock only if the caller still owns it.
-- KEYS[1]: lock key; ARGV[1]: owner id. Returns 1 if released, 0 otherwise.
-- redis-cli --eval scripts/lua/unlock.lua lock:job , pod-1
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('del', KEYS[1])
end
return 0
