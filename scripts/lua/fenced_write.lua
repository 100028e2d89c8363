-- Write to a fenced resource: refuse a token lower than the last one seen.
-- KEYS[1]: resource key; KEYS[2]: last-token key; ARGV[1]: token; ARGV[2]: value.
-- Returns OK, or the error STALE when the token is older than the last write's.
-- redis-cli --eval scripts/lua/fenced_write.lua resource resource:token , 7 payload
local last = tonumber(redis.call('get', KEYS[2]) or '0')
local token = tonumber(ARGV[1])
if token < last then
  return redis.error_reply('STALE token ' .. ARGV[1] .. ' is older than ' .. last)
end
redis.call('set', KEYS[2], token)
redis.call('set', KEYS[1], ARGV[2])
return redis.status_reply('OK')
