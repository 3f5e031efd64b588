import AGConfig

/// Lua pieces the gateway's scripts are composed from.
///
/// Every script takes the time from its caller: `ARGV[1]` is now in Unix µs (a `TimeSource`),
/// so tests can replay exact timelines and advance time instead of sleeping. Only the Platform
/// SSO refresh reads Redis `TIME` besides: its prepare script reports it and its commit checks
/// its deadline against it (`PlatformSSOScripts`), both on the server's own clock by design.
public enum LuaFragments {
    /// Defines `now_us` (Unix µs, from `ARGV[1]`) and `now` (Unix ms).
    public static let now = """
        local now_us = tonumber(ARGV[1])
        local now = math.floor(now_us / 1000)

        """

    /// `words(text)`: the space-separated words of `text` as a list (a family's `alts`).
    public static let words = """
        local function words(text)
          local list = {}
          for word in string.gmatch(text, '%S+') do list[#list + 1] = word end
          return list
        end

        """

    /// `device_epoch(key, seed)` reads a tenant's device epoch, creating it from `seed` when it
    /// is missing (a Redis that restarted empty must never repeat an epoch a worker remembers);
    /// `bump_device_epoch(key, seed)` moves it on, in the script that makes a token invalid;
    /// `device_standing(key)` is `'active'`, `'revoked'` or `'unknown'` (no record).
    public static let deviceEpoch = """
        local function device_epoch(key, seed)
          local epoch = redis.call('GET', key)
          if not epoch then
            redis.call('SET', key, seed)
            epoch = seed
          end
          return epoch
        end
        local function bump_device_epoch(key, seed)
          if redis.call('EXISTS', key) == 1 then redis.call('INCR', key) else redis.call('SET', key, seed) end
        end
        local function device_standing(key)
          local dev = redis.call('HMGET', key, 'pk', 'rev')
          if not dev[1] then return 'unknown' end
          if dev[2] == '1' then return 'revoked' end
          return 'active'
        end

        """

    /// `quota_and_challenge(now, keyId, challengeKey, madKey, graceKey, challengeTTL, madLimit,
    /// graceMs, monthKeyTTL)`, shared by the refresh's and the attestation's prepare scripts: a
    /// device not yet counted this month passes while the tenant is under its
    /// monthly-active-device limit or within the grace period (which starts the first time the
    /// tenant is seen over it); then the challenge must be known, unused and fresh, and is
    /// spent. A grace period belongs to the limit it started at: a new device admitted under
    /// the limit (raised since, by a tier change) ends it, so that reaching the new limit starts
    /// a grace period of its own. Returns nil when the request may go on, else the refusal
    /// `{code, …}`.
    public static let quotaAndChallenge = """
        local function quota_and_challenge(now, key_id, challenge_key, mad_key, grace_key, ttl, limit, grace, key_ttl)
          local under_limit = false
          if limit >= 0 and redis.call('SISMEMBER', mad_key, key_id) == 0 then
            local current = redis.call('SCARD', mad_key)
            if current >= limit then
              local started = redis.call('GET', grace_key)
              if not started then
                redis.call('SET', grace_key, now, 'EX', key_ttl)
                started = now
              end
              if now - tonumber(started) > grace then
                return {'quota_exceeded', tostring(limit), tostring(current)}
              end
            else
              under_limit = true
            end
          end
          local c = redis.call('GET', challenge_key)
          if not c then return {'challenge_invalid'} end
          if string.sub(c, 1, 5) == 'used:' then return {'challenge_already_used'} end
          if now - tonumber(c) > ttl then return {'challenge_expired'} end
          redis.call('SET', challenge_key, 'used:' .. now, 'KEEPTTL')
          if under_limit then redis.call('DEL', grace_key) end
          return nil
        end

        """

    /// `counted(keyId, madKey, subject, subjectKey, deviceKey, monthKeyTTL)`: the tail both
    /// commit scripts share — count the device for the month, read the subject's subscription —
    /// returning `{'ok', subject, subscription, newlyCounted, count}`.
    public static let countedReply = """
        local function counted(key_id, mad_key, subject, subject_key, device_key, key_ttl)
          local added = redis.call('SADD', mad_key, key_id)
          if added == 1 then redis.call('EXPIRE', mad_key, key_ttl) end
          local count = redis.call('SCARD', mad_key)
          local subscription = ''
          if subject ~= '' and subject_key ~= device_key then subscription = redis.call('GET', subject_key) or '' end
          return {'ok', subject, subscription, added, count}
        end

        """
}

extension DeviceLimit {
    /// The limit as the scripts read it: the number, or -1 for unlimited.
    public var scriptArgument: String {
        switch self {
        case .limited(let value): String(value)
        case .unlimited: "-1"
        }
    }
}
