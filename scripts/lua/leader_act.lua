-- A leader's action, checked against its lease: append ARGV[2] to the list
-- KEYS[2] only while the leader key KEYS[1] names ARGV[1] (the pod).
-- Returns 1 when it acted, 0 when the pod is not the leader.
-- redis-cli --eval scripts/lua/leader_act.lua leader:svc leader:svc:log , pod-1 "did x"
if redis.call('get', KEYS[1]) == ARGV[1] then
  redis.call('rpush', KEYS[2], ARGV[2])
  return 1
end
return 0
