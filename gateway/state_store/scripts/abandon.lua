-- Drop a running claim, if the request still owns it, so that a retry may run.
-- KEYS[1]: the key's hash (see claim.lua); ARGV[1]: request id
-- Returns 1 if dropped, else 0.
local entry = redis.call('HMGET', KEYS[1], 'owner', 'state')
if entry[1] ~= ARGV[1] or entry[2] ~= 'running' then
  return 0
end
return redis.call('DEL', KEYS[1])
