-- Store the owner's response under its idempotency key, if the request still owns the key.
-- KEYS[1]: the key's hash (see claim.lua)
-- ARGV: request id, status, body, media type, headers (JSON), the response's request id, ttl in ms
-- Returns 1 if stored, 0 if the request does not own the key (or it is already done).
local entry = redis.call('HMGET', KEYS[1], 'owner', 'state')
if entry[1] ~= ARGV[1] or entry[2] ~= 'running' then
  return 0
end
redis.call('HSET', KEYS[1], 'state', 'done', 'status', ARGV[2], 'body', ARGV[3], 'media_type', ARGV[4],
           'headers', ARGV[5], 'request_id', ARGV[6])
redis.call('PEXPIRE', KEYS[1], ARGV[7])
return 1
