import AGRedis

/// The Platform SSO steps in Redis (DESIGN section 11). Every key lives under the tenant's hash
/// tag `ag:{APPID}:psso:`, and every key a script touches is passed in `KEYS`, so each script
/// runs in one cluster slot. `ARGV[1]` is always now (Unix µs).
///
/// - `dev:<kid>` (hash): `sk`, `ek` (base64 X9.63 signing and encryption keys), `sub`, `claims`
///   (JSON object), `rev` (0/1: disabled by the operator), `epoch` (changes when the device is
///   revoked or handed to another user: families minted under another epoch are dead),
///   `created`, `updated` (Unix ms). `<kid>` is the url-safe spelling of the key id.
/// - `nonce:<nonce>` (string): issue time in ms, or `used:<ms>`; kept twice the nonce lifetime
///   so that an expired or used nonce stays distinguishable from an unknown one.
/// - `fam:<family>` (hash): `kid`, `epoch`, `created` (the login), `last` (last use), `cur` (digest
///   of the one valid token), `prev` (digest of the token `cur` replaced), `rot` (when it was
///   replaced), `rev` (1 after a reuse).
/// - `rt:<digest>` (string): the family of every token ever minted, used or not, so a replayed
///   old token is recognised as reuse for as long as its family lives.
///
/// Family and token keys expire a day after the family's absolute lifetime; before that the
/// scripts decide expiry from the times above, so a family past its lifetime reads "expired".
public enum PlatformSSOScripts {
    /// How long family and token keys outlive the family's absolute expiry (ms).
    public static let keepAfterExpiryMilliseconds: Int64 = 86_400_000

    /// Stores a fresh server nonce with its issue time unless it exists: the challenge script
    /// (`DeviceScripts.issueChallenge`), a nonce being single-use the same way.
    ///
    /// KEYS: nonce. ARGV: now, keep ms (twice the nonce ttl). Reply: the issue time (ms), or -1 on
    /// a collision.
    public static let issueNonce = DeviceScripts.issueChallenge

    /// The refresh's first round trip, before the signature check: the tenant `attest` bucket,
    /// then the device record. Changes nothing but the bucket. Ends with the server's own clock
    /// (`TIME`), from which the gateway dates the commit's deadline (`commitRefresh`).
    ///
    /// KEYS: device, attest bucket. ARGV: now, attest limit per minute. Reply: `{bucket reply
    /// (see RateLimitScript), outcome, TIME seconds, TIME microseconds}`, outcome `{'ok', sk, ek,
    /// sub, claims}` or a refusal.
    public static let prepareRefresh = RedisScript(LuaFragments.now + RateLimitScript.takeFunction + """
        local function timed(bucket, outcome)
          local t = redis.call('TIME')
          return {bucket, outcome, t[1], t[2]}
        end
        local bucket = take_buckets(now_us, {KEYS[2]}, ARGV, 2)
        if bucket[1] ~= 1 then return timed(bucket, {'rate_limited'}) end
        local dev = redis.call('HMGET', KEYS[1], 'sk', 'ek', 'sub', 'claims', 'rev')
        if not dev[1] then return timed(bucket, {'device_unknown'}) end
        if dev[5] == '1' then return timed(bucket, {'device_disabled'}) end
        return timed(bucket, {'ok', dev[1], dev[2] or '', dev[3] or '', dev[4] or '{}'})
        """)

    /// The refresh's second round trip, after the signature and every claim passed: spends the
    /// server nonce first (so from here on it is spent whatever follows), then checks the device
    /// again (revoked or deleted since the first trip) and the refresh token:
    /// - the family's current token, or one of its unused siblings (`alts`, below), rotates: the
    ///   successor becomes current, the token presented becomes `prev`, the siblings go;
    /// - `prev` again within `reuse_grace` of its rotation (no successor used, or it would no
    ///   longer be `prev`): a response was lost, or two requests ran in parallel: a new successor
    ///   becomes current and the one it replaces joins `alts` (at most 8), valid until any of
    ///   them is used. DESIGN 11 says the new successor *replaces* the unused one; but two
    ///   parallel answers reach the Mac in either order, whatever the order of their commits,
    ///   and the Mac keeps the last answer it got (a sweep, stop 35, saw it logged out in 15 to
    ///   18 of 40 such pairs) — so the replacing happens when one of them is used;
    /// - any other token of the family is reuse: the whole family is revoked.
    ///
    /// A script that starts after `deadline` (the server's clock, µs) changes nothing and says
    /// `'late'`: the gateway has given up on it by then and answered 503, and the Mac will
    /// present the same token again — had this rotated it, that retry would read as reuse and
    /// end the family (an independent sweep saw a Redis stall of 400 ms log Macs out).
    ///
    /// KEYS: nonce, device, presented token `rt:`, family, successor `rt:`. ARGV: now, nonce ttl
    /// ms, kid, family id, presented digest, successor digest, family ttl ms, idle ms, grace ms,
    /// deadline ('' = none). Reply: `{'ok', refresh_token_expires_in seconds}`, `{'late'}` or a
    /// refusal `{code}`.
    public static let commitRefresh = RedisScript(LuaFragments.now + LuaFragments.words + """
        if ARGV[10] ~= '' then
          local t = redis.call('TIME')
          if tonumber(t[1]) * 1000000 + tonumber(t[2]) > tonumber(ARGV[10]) then return {'late'} end
        end
        local n = redis.call('GET', KEYS[1])
        if not n then return {'nonce_unknown'} end
        if string.sub(n, 1, 5) == 'used:' then return {'nonce_used'} end
        if now - tonumber(n) > tonumber(ARGV[2]) then return {'nonce_expired'} end
        redis.call('SET', KEYS[1], 'used:' .. now, 'KEEPTTL')
        local dev = redis.call('HMGET', KEYS[2], 'epoch', 'rev')
        if not dev[1] then return {'device_unknown'} end
        if dev[2] == '1' then return {'device_disabled'} end
        if redis.call('GET', KEYS[3]) ~= ARGV[4] then return {'rt_unknown'} end
        local fam = redis.call('HMGET', KEYS[4], 'kid', 'epoch', 'created', 'last', 'cur', 'prev', 'rot', 'rev', 'alts')
        if fam[1] ~= ARGV[3] then return {'rt_unknown'} end
        if fam[8] == '1' or fam[2] ~= dev[1] then return {'rt_revoked'} end
        local created, last, rot = tonumber(fam[3]), tonumber(fam[4]), tonumber(fam[7])
        local ttl, idle, grace = tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9])
        if now >= created + ttl or now >= last + idle then return {'rt_expired'} end
        local alts = fam[9] or ''
        if ARGV[5] == fam[5] or (alts ~= '' and string.find(' ' .. alts .. ' ', ' ' .. ARGV[5] .. ' ', 1, true)) then
          redis.call('HSET', KEYS[4], 'cur', ARGV[6], 'prev', ARGV[5], 'rot', now, 'last', now, 'alts', '')
        elseif ARGV[5] == fam[6] and now - rot < grace then
          local kept = words(alts .. ' ' .. fam[5])
          while #kept > 8 do table.remove(kept, 1) end
          redis.call('HSET', KEYS[4], 'cur', ARGV[6], 'last', now, 'alts', table.concat(kept, ' '))
        else
          redis.call('HSET', KEYS[4], 'rev', '1')
          return {'rt_reused'}
        end
        redis.call('SET', KEYS[5], ARGV[4], 'PX', math.max(1000, created + ttl + \(keepAfterExpiryMilliseconds) - now))
        return {'ok', tostring(math.floor((math.min(created + ttl, now + idle) - now) / 1000))}
        """)

    /// Takes back a rotation whose answer the Mac never got: run after a commit that failed —
    /// replicas that did not confirm it (`redis.wait_replicas`), a lost connection — when the
    /// script may still have rotated the token on the primary. The successor is forgotten
    /// wherever it stands, as on a replica that never got the commit, so the Mac's retry with
    /// the token it holds is an ordinary refresh (or grace answer) rather than reuse:
    /// - still current, the token presented before it: after a grace answer (`alts` not empty)
    ///   the successor it replaced is current again, after a rotation the presented token;
    /// - replaced meanwhile by a later grace answer (it sits in `alts`): it leaves `alts` — else
    ///   that later answer's own undo would make it current again, a token the Mac never got,
    ///   and the Mac's retry with the token it holds would be reuse once the window closed (a
    ///   sweep of stop 35's fixes: two parallel refreshes both refused, in 2 of 5 runs);
    /// - anything else (the commit did not run, refused, or was used since): nothing changes.
    ///
    /// KEYS: family, successor `rt:`. ARGV: now, presented digest, successor digest. Reply: 1
    /// taken back, 0 nothing to take back.
    public static let undoRotation = RedisScript(LuaFragments.now + LuaFragments.words + """
        local fam = redis.call('HMGET', KEYS[1], 'cur', 'prev', 'alts')
        local alts = fam[3] or ''
        if fam[1] ~= ARGV[3] then
          local kept, found = {}, false
          for _, digest in ipairs(words(alts)) do
            if digest == ARGV[3] then found = true else kept[#kept + 1] = digest end
          end
          if not found then return 0 end
          redis.call('HSET', KEYS[1], 'alts', table.concat(kept, ' '))
          redis.call('DEL', KEYS[2])
          return 1
        end
        if fam[2] ~= ARGV[2] then return 0 end
        if alts == '' then
          redis.call('HSET', KEYS[1], 'cur', ARGV[2], 'prev', '')
        else
          local kept = words(alts)
          local replaced = table.remove(kept)
          redis.call('HSET', KEYS[1], 'cur', replaced, 'alts', table.concat(kept, ' '))
        end
        redis.call('DEL', KEYS[2])
        return 1
        """)

    /// Registers a device or updates its record (admin `PUT`). A new device, or one handed to
    /// another user (`sub` changed), gets a new epoch: families of the previous registration end.
    /// A disabled device is enabled again (its families died when it was disabled).
    ///
    /// KEYS: device. ARGV: now, sk, ek, sub, claims JSON, new epoch. Reply: 'created' or 'updated'.
    public static let registerDevice = RedisScript(LuaFragments.now + """
        local old = redis.call('HMGET', KEYS[1], 'sub', 'epoch')
        local status, epoch = 'updated', old[2]
        if not epoch then
          status, epoch = 'created', ARGV[6]
          redis.call('HSET', KEYS[1], 'created', now)
        elseif old[1] ~= ARGV[4] then
          epoch = ARGV[6]
        end
        redis.call('HSET', KEYS[1], 'sk', ARGV[2], 'ek', ARGV[3], 'sub', ARGV[4], 'claims', ARGV[5], 'rev', '0',
          'epoch', epoch, 'updated', now)
        return status
        """)

    /// Starts a new family for a device (admin `POST …/refresh-tokens`).
    ///
    /// KEYS: device, family, token `rt:`. ARGV: now, kid, family id, token digest, family ttl ms,
    /// idle ms. Reply `{'ok', expires_in seconds}`, `{'device_unknown'}`, `{'device_disabled'}` or
    /// `{'collision'}` (a family id drawn twice: never, with 128 random bits).
    public static let mintRefreshToken = RedisScript(LuaFragments.now + """
        local dev = redis.call('HMGET', KEYS[1], 'epoch', 'rev')
        if not dev[1] then return {'device_unknown'} end
        if dev[2] == '1' then return {'device_disabled'} end
        if redis.call('EXISTS', KEYS[2]) == 1 then return {'collision'} end
        local ttl, idle = tonumber(ARGV[5]), tonumber(ARGV[6])
        redis.call('HSET', KEYS[2], 'kid', ARGV[2], 'epoch', dev[1], 'created', now, 'last', now, 'cur', ARGV[4],
          'prev', '', 'rot', now, 'rev', '0')
        local keep = ttl + \(keepAfterExpiryMilliseconds)
        redis.call('PEXPIRE', KEYS[2], keep)
        redis.call('SET', KEYS[3], ARGV[3], 'PX', keep)
        return {'ok', tostring(math.floor(math.min(ttl, idle) / 1000))}
        """)

    /// Disables a device and ends every family of it (a new epoch). KEYS: device. ARGV: now, new
    /// epoch. Reply 1, or 0 when there is no such device.
    public static let revokeDevice = RedisScript(LuaFragments.now + """
        if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
        redis.call('HSET', KEYS[1], 'rev', '1', 'epoch', ARGV[2], 'updated', now)
        return 1
        """)
}

/// Why a Platform SSO script refused a request: every status the scripts return besides `ok`.
public enum PlatformSSORefusal: String, Sendable, Equatable, CaseIterable {
    case rateLimited = "rate_limited"
    case deviceUnknown = "device_unknown"
    case deviceDisabled = "device_disabled"
    case nonceUnknown = "nonce_unknown"
    case nonceExpired = "nonce_expired"
    case nonceUsed = "nonce_used"
    case refreshTokenUnknown = "rt_unknown"
    case refreshTokenExpired = "rt_expired"
    case refreshTokenRevoked = "rt_revoked"
    case refreshTokenReused = "rt_reused"
}
