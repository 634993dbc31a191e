-- Take one request, ``cost`` tokens and one concurrency slot from a tenant's budget: all or nothing.
-- KEYS[1]: concurrency sorted set (request id scored by lease end), KEYS[2]: requests bucket,
-- KEYS[3]: tokens bucket
-- ARGV: now, request id, lease_s, max_concurrent, requests_per_second, tokens_per_minute, cost,
--       the retry_after_s of a concurrency refusal (a limit of '' is none)
-- Returns {} when taken, else {reason, retry_after_s ('' for none), signal, value, ...}; the checks
-- run in scheduling/admission.py's order: concurrency, requests, tokens.
local now, request_id, lease_s, cost = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[7])
local max_concurrent = tonumber(ARGV[4])
local rps, tpm = limit(ARGV[5]), limit(ARGV[6])

if max_concurrent then
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', fmt(now))
  local in_flight = redis.call('ZCARD', KEYS[1])
  if in_flight >= max_concurrent then
    return {'max_concurrent', ARGV[8], 'in_flight', fmt(in_flight), 'max_concurrent', fmt(max_concurrent)}
  end
end
local requests, requests_t, requests_capacity
if rps then
  requests_capacity = math.max(1, rps)
  requests, requests_t = bucket_level(KEYS[2], requests_capacity, rps, now)
  if requests < 1 then
    return {'requests_per_second', fmt((1 - requests) / rps), 'requests_per_second', fmt(rps)}
  end
end
local tokens, tokens_t
if tpm then
  if cost > tpm then
    return {'tokens_per_minute', '', 'cost_tokens', fmt(cost), 'tokens_per_minute', fmt(tpm)}
  end
  tokens, tokens_t = bucket_level(KEYS[3], tpm, tpm / 60, now)
  if tokens < cost then
    return {'tokens_per_minute', fmt((cost - tokens) / (tpm / 60)), 'cost_tokens', fmt(cost),
            'tokens_available', fmt(tokens), 'tokens_per_minute', fmt(tpm)}
  end
end

if max_concurrent then
  redis.call('ZADD', KEYS[1], fmt(now + lease_s), request_id)
  local ttl_ms = math.ceil((lease_s + 60) * 1000)
  if redis.call('PTTL', KEYS[1]) < ttl_ms then
    redis.call('PEXPIRE', KEYS[1], ttl_ms)
  end
end
if rps then
  bucket_store(KEYS[2], requests_capacity, rps, requests - 1, requests_t)
end
if tpm then
  bucket_store(KEYS[3], tpm, tpm / 60, tokens - cost, tokens_t)
end
return {}
