-- Token buckets stored as hashes {level, t}; an absent bucket is full. Time is the caller's ``now``
-- (not Redis TIME); a ``now`` earlier than ``t`` refills nothing (as scheduling/buckets.py).
-- Prepended to the scripts that use it.
local function fmt(x)
  return string.format('%.17g', x)
end

-- The bucket's level at ``now`` (never above ``capacity``, which may have shrunk since it was
-- stored) and the time it is as of.
local function bucket_level(key, capacity, rate, now)
  local stored = redis.call('HMGET', key, 'level', 't')
  if not stored[1] then
    return capacity, now
  end
  local level, t = tonumber(stored[1]), tonumber(stored[2])
  if now > t then
    return math.min(capacity, level + (now - t) * rate), now
  end
  return math.min(capacity, level), t
end

-- Store a level; the key lives until the bucket would be full again (then absent means the same),
-- plus a minute.
local function bucket_store(key, capacity, rate, level, t)
  redis.call('HSET', key, 'level', fmt(level), 't', fmt(t))
  redis.call('PEXPIRE', key, math.ceil(((capacity - level) / rate + 60) * 1000))
end

-- A limit argument: a positive number, or nil for '' (no limit).
local function limit(arg)
  local value = tonumber(arg)
  if value and value > 0 then
    return value
  end
  return nil
end
