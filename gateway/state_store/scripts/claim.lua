-- Claim an idempotency key for a request, atomically.
-- KEYS[1]: the key's hash {owner, fingerprint, state = running | done, and once done: status, body,
--          media_type, headers, request_id (the response's)}
-- ARGV: fingerprint, request id, ttl in ms
-- Returns {state, owner request id} and, when done, the stored status, body, media type, headers and
-- the response's request id.
local entry = redis.call('HMGET', KEYS[1], 'fingerprint', 'state', 'owner')
if not entry[1] then
  redis.call('HSET', KEYS[1], 'fingerprint', ARGV[1], 'state', 'running', 'owner', ARGV[2])
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
  return {'owner', ARGV[2]}
end
if entry[1] ~= ARGV[1] then
  return {'mismatch', entry[3]}
end
if entry[2] == 'done' then
  local response = redis.call('HMGET', KEYS[1], 'status', 'body', 'media_type', 'headers', 'request_id')
  return {'done', entry[3], response[1], response[2], response[3], response[4], response[5]}
end
if entry[3] == ARGV[2] then
  return {'owner', entry[3]}
end
return {'in_progress', entry[3]}
