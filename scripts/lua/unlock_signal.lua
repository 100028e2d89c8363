-- Unlock that wakes waiters: KEYS[1] lock, KEYS[2] signal list, ARGV[1]
-- owner. Deletes the lock if ARGV[1] owns it and pushes one token onto the
-- signal list (the first waiter pops it). Returns 1 if released.
if redis.call('get', KEYS[1]) == ARGV[1] then
    redis.call('del', KEYS[1])
    redis.call('lpush', KEYS[2], '1')
    redis.call('pexpire', KEYS[2], 60000)
    return 1
end
return 0
