-- Add a gateway's per-tenant service to the fleet's totals and to its own cumulative totals.
-- KEYS[1]: fleet totals hash (tenant -> service), KEYS[2]: this gateway's hash (tenant -> service)
-- ARGV: ttl in ms, then tenant, delta pairs
-- Returns {1 if the fleet totals existed before this call else 0, fleet totals, this gateway's totals}
-- (the totals as flat HGETALL lists).
local existed = redis.call('EXISTS', KEYS[1])
for i = 2, #ARGV, 2 do
  redis.call('HINCRBYFLOAT', KEYS[1], ARGV[i], ARGV[i + 1])
  redis.call('HINCRBYFLOAT', KEYS[2], ARGV[i], ARGV[i + 1])
end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
redis.call('PEXPIRE', KEYS[2], ARGV[1])
return {existed, redis.call('HGETALL', KEYS[1]), redis.call('HGETALL', KEYS[2])}
