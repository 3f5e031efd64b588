@testable import AGJOSE
import AGHTTP
import Testing

@testable import AGFormats
@testable import AGConfig
@testable import AGPolicy
@testable import AGGateway

/// Token extraction, the per-request claim checks, the token cache and revocation events.
@Suite struct ProxyTokenTests {
    static func token(_ claims: [String: JSONValue]) throws -> VerifiedToken {
        let payload = JSONValue.object(claims).serialized()
        let header = try JWSHeader(decoding: Array(#"{"alg":"ES256","kid":"k","typ":"JWT"}"#.utf8))
        return try VerifiedToken(VerifiedJWT(header: header, payload: payload, claims: claims))
    }

    static let now = 1_700_000_000.0
    static let good: [String: JSONValue] = [
        "iss": "https://gw", "aud": "TEAM123456.com.example.app", "sub": "a2V5", "team_id": "TEAM123456",
        "bundle_id": "com.example.app", "iat": .integer(Int64(now) - 10), "nbf": .integer(Int64(now) - 10),
        "exp": .integer(Int64(now) + 3600),
    ]
    static let policy = TokenClaimsPolicy(issuer: "https://gw", leeway: 30)

    static func check(_ changes: [String: JSONValue?], now: Double = now) throws -> ProxyAuthFailure? {
        var claims = good
        for (key, value) in changes { claims[key] = value }
        let token: VerifiedToken
        do {
            token = try Self.token(claims)
        } catch let failure as ProxyAuthFailure {
            return failure
        }
        do throws(ProxyAuthFailure) {
            try policy.check(token.verified, teamID: "TEAM123456", bundleID: "com.example.app", audience: "TEAM123456.com.example.app", now: now)
            return nil
        } catch {
            return error
        }
    }

    @Test func claimChecks() throws {
        #expect(try Self.check([:]) == nil)
        #expect(try Self.check(["exp": .integer(Int64(Self.now) - 20)]) == nil, "within leeway")
        #expect(try Self.check(["exp": .integer(Int64(Self.now) - 31)]) == .expired)
        #expect(try Self.check(["exp": nil]) == .invalid("the token has no exp claim"))
        #expect(try Self.check(["exp": "soon"]) == .invalid("the exp claim is not a number"))
        #expect(try Self.check(["iat": "x"]) == .invalid("the iat claim is not a number"))
        #expect(try Self.check(["nbf": .integer(Int64(Self.now) + 20)]) == nil, "within leeway")
        #expect(try Self.check(["nbf": .integer(Int64(Self.now) + 60)]) == .invalid("the token is not valid yet"))
        #expect(try Self.check(["iss": "https://other"]) == .invalid("the token was not issued by this gateway"))
        #expect(try Self.check(["iss": nil]) == .invalid("the token was not issued by this gateway"))
        #expect(try Self.check(["aud": "other"]) == .invalid("the token is meant for another audience"))
        #expect(try Self.check(["aud": ["other", "TEAM123456.com.example.app"]]) == nil)
        #expect(try Self.check(["team_id": "OTHER12345", "aud": "OTHER12345.com.example.app"]) == .tenantMismatch)
        #expect(try Self.check(["bundle_id": "com.example.other"]) == .tenantMismatch)
        #expect(try Self.check(["team_id": nil]) == .tenantMismatch)
        #expect(try Self.check(["sub": nil]) == .invalid("the token names no device"))
    }

    @Test func failuresMapToContractErrors() {
        let rows: [(ProxyAuthFailure, Int, String)] = [
            (.missing, 401, "token_missing"), (.invalid("x"), 401, "token_invalid"), (.expired, 401, "token_expired"),
            (.tenantMismatch, 403, "token_tenant_mismatch"), (.revoked, 403, "forbidden"),
        ]
        for (failure, status, code) in rows {
            #expect(failure.error.status == status)
            #expect(failure.error.code == code)
        }
        #expect(ProxyAuthFailure.missing.error.headers.contains { $0 == ("WWW-Authenticate", "Bearer") })
    }

    @Test func extraction() {
        func extract(_ fields: [(String, String)], _ header: String = "Authorization") -> Result<String, ProxyAuthFailure> {
            Result { () throws(ProxyAuthFailure) -> String in
                try BearerToken.extract(from: ForwardHeaders.parsedFields(HTTPHeaders(fields.map { (name: $0.0, value: $0.1) })),
                                        header: header)
            }
        }
        #expect(extract([("Authorization", "Bearer abc")]) == .success("abc"))
        #expect(extract([("authorization", "bearer  abc ")]) == .success("abc"))
        #expect(extract([]) == .failure(.missing))
        #expect(extract([("Authorization", "Basic dTpw")]) == .failure(.missing))
        #expect(extract([("Authorization", "Bearer ")]) == .failure(.missing))
        #expect(extract([("Authorization", "abc")]) == .failure(.missing))
        #expect(extract([("Authorization", "Bearer a"), ("Authorization", "Bearer b")])
                == .failure(.invalid("the token header is present more than once")))
        #expect(extract([("X-App-Token", "abc")], "X-App-Token") == .success("abc"))
        #expect(extract([("X-App-Token", "Bearer abc")], "X-App-Token") == .success("abc"))
        #expect(extract([("Authorization", "Bearer abc")], "X-App-Token") == .failure(.missing))
    }

    @Test func cacheHitsExpiryGenerationsAndBound() throws {
        let cache = TokenCache(capacity: 3)
        let entry = try Self.token(Self.good)
        cache.insert("t1", entry, generation: 1)
        #expect(cache.lookup("t1", generation: 1, now: Self.now, leeway: 30) === entry)
        #expect(cache.lookup("t1", generation: 1, now: Self.now + 3600 + 31, leeway: 30) == nil, "expired entries go")
        #expect(cache.count == 0)
        for name in ["a", "b", "c", "d"] { cache.insert(name, entry, generation: 1) }
        #expect(cache.count == 3, "bounded")
        #expect(cache.lookup("a", generation: 1, now: Self.now, leeway: 30) == nil, "oldest evicted first")
        #expect(cache.lookup("d", generation: 1, now: Self.now, leeway: 30) != nil)
        cache.insert("old", entry, generation: 0)
        #expect(cache.lookup("old", generation: 0, now: Self.now, leeway: 30) == nil, "a request on an older snapshot does not insert")
        #expect(cache.lookup("d", generation: 2, now: Self.now, leeway: 30) == nil, "a newer snapshot empties the cache")
        #expect(cache.count == 0)
    }

    @Test func cacheEvictionSurvivesReinsertion() throws {
        let cache = TokenCache(capacity: 2)
        let entry = try Self.token(Self.good)
        cache.insert("a", entry, generation: 1)
        _ = cache.lookup("a", generation: 1, now: Self.now + 9999, leeway: 0)
        cache.insert("b", entry, generation: 1)
        cache.insert("a", entry, generation: 1)
        cache.insert("c", entry, generation: 1)
        #expect(cache.lookup("a", generation: 1, now: Self.now, leeway: 30) != nil, "the stale ring slot of a does not evict its newer entry")
        #expect(cache.lookup("b", generation: 1, now: Self.now, leeway: 30) == nil)
    }

    /// The cache recognises a token by its length and last 8 bytes, then compares the whole
    /// token: a look-alike with the same tail (a forged token ending like a cached one) is a
    /// miss, never the cached token's claims.
    @Test func cacheComparesWholeTokensBehindTheFingerprint() throws {
        let cache = TokenCache(capacity: 4)
        let entry = try Self.token(Self.good)
        let cached = "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJhIn0.SIGNATURE-TAIL-12345678"
        let lookalike = "eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJiIn0.SIGNATURE-TAIL-12345678"
        #expect(cached.utf8.count == lookalike.utf8.count)
        cache.insert(cached, entry, generation: 1)
        #expect(cache.lookup(cached, generation: 1, now: Self.now, leeway: 30) === entry)
        #expect(cache.lookup(lookalike, generation: 1, now: Self.now, leeway: 30) == nil)
        cache.insert(lookalike, entry, generation: 1)
        #expect(cache.lookup(cached, generation: 1, now: Self.now, leeway: 30) === entry, "the first token keeps its slot")
        #expect(cache.count == 1, "the look-alike is not cached: it is verified on each use")
        // Read off a request head at an offset, as the proxy does.
        let head = Array("GET / HTTP/1.1\r\nAuthorization: Bearer \(cached)\r\n\r\n".utf8)
        let start = head.count - 4 - cached.utf8.count
        #expect(cache.lookup(start..<(head.count - 4), of: head, generation: 1, now: Self.now, leeway: 30) === entry)
        #expect(cache.lookup(start..<(head.count - 5), of: head, generation: 1, now: Self.now, leeway: 30) == nil)
    }

    /// The eight-bytes-at-a-time comparison against the plain one: every length to 40, a
    /// difference at every position, at every offset of the range in its buffer.
    @Test func byteComparisonMatchesArrayEquality() {
        for length in 0...40 {
            let other = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
            for offset in 0..<9 {
                let storage = [UInt8](repeating: 0xAA, count: offset) + other + [0x55, 0x66]
                let range = offset..<(offset + length)
                #expect(HTTPFields.bytes(storage, range, equal: other))
                #expect(!HTTPFields.bytes(storage, offset..<(offset + length + 1), equal: other))
                for position in 0..<length {
                    var changed = storage
                    changed[offset + position] ^= 0x01
                    #expect(!HTTPFields.bytes(changed, range, equal: other), "length \(length), offset \(offset), position \(position)")
                }
            }
        }
        #expect(!HTTPFields.bytes([1, 2, 3], 2..<5, equal: [3, 0, 0]), "a range past the end is no match")
    }

    @Test func revocationEvents() {
        #expect(RevocationWatcher.deviceEvent(in: Array(#"{"type":"revoke","appId":"A.b","keyId":"k+/="}"#.utf8))! == ("A.b", "k+/=", true))
        #expect(RevocationWatcher.deviceEvent(in: Array(#"{"type":"restore","appId":"A.b","keyId":"k"}"#.utf8))! == ("A.b", "k", false))
        #expect(RevocationWatcher.deviceEvent(in: Array(#"{"type":"tier","appId":"A.b"}"#.utf8)) == nil)
        #expect(RevocationWatcher.deviceEvent(in: Array("not json".utf8)) == nil)
    }
}
