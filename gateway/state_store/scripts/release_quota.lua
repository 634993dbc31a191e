-- Give back a request's concurrency slot and the tokens it did not use (never above capacity).
-- KEYS[1]: concurrency sorted set, KEYS[2]: tokens bucket
-- ARGV: request id, now, tokens_per_minute ('' for none), unused tokens
redis.call('ZREM', KEYS[1], ARGV[1])
local now, tpm, unused = tonumber(ARGV[2]), limit(ARGV[3]), tonumber(ARGV[4])
if tpm and unused > 0 and redis.call('EXISTS', KEYS[2]) == 1 then
  local tokens, t = bucket_level(KEYS[2], tpm, tpm / 60, now)
  bucket_store(KEYS[2], tpm, tpm / 60, math.min(tpm, tokens + unused), t)
end
return 1
