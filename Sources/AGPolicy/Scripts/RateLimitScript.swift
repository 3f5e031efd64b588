import AGConfig
import AGRedis

/// The token-bucket decision as one Redis Lua script: `TokenBucket`'s maths, atomically, on
/// one or more buckets at once, at the time the caller passes (`TimeSource`: the Redis-aligned
/// clock in production, a controlled one in tests).
///
/// - `KEYS[i]`: a bucket hash (`tokens` in units, `ts` in Unix µs). `ARGV[1]`: now (Unix µs);
///   `ARGV[1 + i]`: bucket i's limit per minute. A missing hash is a full bucket.
/// - A request is allowed only when *every* bucket holds a token; then one token is taken from
///   each. When any bucket is empty nothing is written, so a refused request changes no state.
/// - A written bucket expires when it would be full again plus a second: an idle bucket
///   vanishes, and a missing bucket reads as full, which it would be by then.
/// - Reply: `{allowed, then per bucket: hadToken, remaining, resetAt, retryAfter}` (integers;
///   `retryAfter` is 0 unless the request is refused and this bucket is empty).
///
/// Every key of one call must share a cluster slot. Tenant keys (`ag:{APPID}:rl:…`) and IP
/// keys (`ag:ip:{IP}:rl:…`) do not, so `RateLimiter` sends one call per slot and gives a
/// refused request its tokens back with `AdmissionScripts.refund`.
public enum RateLimitScript {
    public static let source = LuaFragments.now + takeFunction + "return take_buckets(now_us, KEYS, ARGV, 2)\n"

    public static let script = RedisScript(source)

    /// The script's arguments for `checks` at `now` (Unix µs).
    public static func arguments(_ checks: [BucketCheck], now: Int64) -> [String] {
        [String(now)] + checks.map { String($0.limitPerMinute) }
    }

    /// Defines `COST` (units per token) and the Lua function `refilled_bucket(key, limit, now)`:
    /// the bucket's limit, capacity, units and time stamp refilled to `now` (`TokenBucket.refill`
    /// step by step; a missing hash is a full bucket), whether the hash was there, or `nil` and
    /// an error reply when the limit is not an integer in range. Shared by the per-request
    /// check, the lease and the refund.
    public static let refillFunction = """
        local COST = \(TokenBucket.unitsPerToken)
        local function refilled_bucket(key, limit_arg, now)
          local limit = tonumber(limit_arg)
          if not limit or limit < 1 or limit > \(TokenBucket.maximumLimitPerMinute) or limit % 1 ~= 0 then
            return nil, redis.error_reply('ERR rate limit ' .. tostring(limit_arg) .. ' out of range')
          end
          local cap = limit * COST
          local state = redis.call('HMGET', key, 'tokens', 'ts')
          local u, ts = tonumber(state[1]), tonumber(state[2])
          if u == nil or ts == nil then return limit, cap, cap, now, false end
          if u < 0 then u = 0 end
          local elapsed = now - ts
          if elapsed < 0 then elapsed = 0 end
          if elapsed > COST then elapsed = COST end
          u = math.min(cap, u + elapsed * limit)
          if now > ts then ts = now end
          return limit, cap, u, ts, true
        end

        """

    /// Defines the Lua function `take_buckets(now, keys, args, first)` (bucket i's limit is
    /// `args[first + i - 1]`) returning the reply described above, so another script (the
    /// refresh's `prepare`) can take a bucket in the same round trip. Mirrors `TokenBucket.refill`, `consume` and `decision` step by step; the numbers
    /// stay integers below 2^53, so Lua's doubles compute them exactly.
    public static let takeFunction = refillFunction + """
        local function take_buckets(now, keys, limit_args, first)
        local n = #keys
        local limits, units, stamps = {}, {}, {}
        local allowed = 1
        for i = 1, n do
          local limit, cap, u, ts = refilled_bucket(keys[i], limit_args[first + i - 1], now)
          if not limit then return cap end
          if u < COST then allowed = 0 end
          limits[i], units[i], stamps[i] = limit, u, ts
        end
        local reply = {allowed}
        for i = 1, n do
          local limit, u, ts = limits[i], units[i], stamps[i]
          local had = 0
          if u >= COST then had = 1 end
          if allowed == 1 then u = u - COST end
          local toFull = math.ceil((limit * COST - u) / limit)
          if allowed == 1 then
            redis.call('HSET', keys[i], 'tokens', string.format('%.0f', u), 'ts', string.format('%.0f', ts))
            redis.call('PEXPIRE', keys[i], math.ceil(toFull / 1000) + 1000)
          end
          local retryAfter = 0
          if allowed == 0 and had == 0 then
            retryAfter = math.max(1, math.ceil(math.ceil((COST - u) / limit) / 1000000))
          end
          reply[#reply + 1] = had
          reply[#reply + 1] = math.floor(u / COST)
          reply[#reply + 1] = math.ceil((ts + toFull) / 1000000)
          reply[#reply + 1] = retryAfter
        end
        return reply
        end

        """

    /// A lease: up to `ARGV[3]` tokens of one bucket at once (`TokenBucket.take(upTo:)` step by
    /// step), for a worker to spend locally without a round trip per request, and the tenant's
    /// device epoch (`AdmissionScripts.deviceStanding`), so that the worker knows whether the
    /// device records it checked are still as it found them.
    ///
    /// KEYS: the bucket, the tenant's device epoch. ARGV: now (Unix µs), limit per minute,
    /// tokens wanted, epoch seed. Reply: `{granted, remaining, resetAt, retryAfter, epoch}`;
    /// nothing of the bucket is written when none is granted.
    public static let leaseSource = LuaFragments.now + LuaFragments.deviceEpoch + refillFunction + """
        local want = math.max(1, math.floor(tonumber(ARGV[3]) or 1))
        local limit, cap, u, ts = refilled_bucket(KEYS[1], ARGV[2], now_us)
        if not limit then return cap end
        local granted = math.min(want, math.floor(u / COST))
        if granted >= 1 then u = u - granted * COST end
        local toFull = math.ceil((cap - u) / limit)
        if granted >= 1 then
          redis.call('HSET', KEYS[1], 'tokens', string.format('%.0f', u), 'ts', string.format('%.0f', ts))
          redis.call('PEXPIRE', KEYS[1], math.ceil(toFull / 1000) + 1000)
        end
        local retryAfter = 0
        if granted < 1 then retryAfter = math.max(1, math.ceil(math.ceil((COST - u) / limit) / 1000000)) end
        return {granted, math.floor(u / COST), math.ceil((ts + toFull) / 1000000), retryAfter, device_epoch(KEYS[2], ARGV[4])}
        """

    public static let lease = RedisScript(leaseSource)

    /// A lease reply: tokens granted, the bucket's decision (allowed when any was granted) and
    /// the tenant's device epoch.
    public static func leaseDecision(from reply: RedisValue, limit: Int) -> (granted: Int, decision: TokenBucket.Decision, epoch: String)? {
        guard let values = reply.array, values.count == 5, let granted = values[0].int, let remaining = values[1].int,
              let resetAt = values[2].int, let retryAfter = values[3].int, let epoch = values[4].string else { return nil }
        return (Int(granted), TokenBucket.Decision(allowed: granted > 0, limit: limit, remaining: Int(remaining),
                                                   resetAt: resetAt, retryAfter: Int(retryAfter)), epoch)
    }

    /// The per-bucket decisions in `checks` order, or nil when the reply has the wrong shape.
    public static func decisions(from reply: RedisValue, limits: [Int]) -> (allowed: Bool, decisions: [TokenBucket.Decision])? {
        guard let values = reply.array, values.count == 1 + 4 * limits.count, let allowed = values[0].int else {
            return nil
        }
        var decisions: [TokenBucket.Decision] = []
        decisions.reserveCapacity(limits.count)
        for (index, limit) in limits.enumerated() {
            let base = 1 + 4 * index
            guard let had = values[base].int, let remaining = values[base + 1].int,
                  let resetAt = values[base + 2].int, let retryAfter = values[base + 3].int else { return nil }
            decisions.append(TokenBucket.Decision(allowed: had == 1, limit: limit, remaining: Int(remaining),
                                                  resetAt: resetAt, retryAfter: Int(retryAfter)))
        }
        return (allowed == 1, decisions)
    }
}
