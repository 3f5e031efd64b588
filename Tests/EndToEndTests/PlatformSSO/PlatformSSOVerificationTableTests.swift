import AGCrypto
import AGDevice
import AGFormats
import AGPlatformSSO
import AGTestSupport
import Foundation
import Testing

/// Every request check of section 11 through the real gateway: each row changes one thing of a
/// valid refresh request and asserts the status, the OAuth `error`, whether the server nonce was
/// spent, and that a refused request rotated nothing.
@Suite("Platform SSO request verification, end to end")
struct PlatformSSOVerificationTableTests {
    /// The parties a row may use.
    struct Parties: Sendable {
        let mac: SimulatedMac
        /// Registered too, with its own family.
        let other: SimulatedMac
        let otherToken: String
        /// Never registered.
        let stranger: SimulatedMac
    }

    /// What a row sends: a changed request signed by the Mac, a JWS of its own, or a whole body.
    enum Change: Sendable {
        case claims(@Sendable (inout MacRefreshRequest, Parties) -> Void)
        case jws(@Sendable (MacRefreshRequest, Parties) throws -> String)
        case body(@Sendable (String) -> String)
    }

    struct Row: Sendable {
        let name: String
        let status: Int
        let error: String?
        /// Whether the server nonce ends up spent (only once the store checked it).
        var nonceSpent = false
        let change: Change
    }

    static func claim(_ name: String, _ value: JSONValue?) -> Change {
        .claims { request, _ in request.set(name, value) }
    }

    static func header(_ name: String, _ value: JSONValue?) -> Change {
        .claims { request, _ in request.setHeader(name, value) }
    }

    static func crypto(_ name: String, _ value: JSONValue?) -> Change {
        .claims { request, _ in
            var crypto = request.value("jwe_crypto")?.objectValue ?? [:]
            crypto[name] = value
            request.set("jwe_crypto", .object(crypto))
        }
    }

    static func apv(_ build: @escaping @Sendable (SimulatedMac, String) -> [UInt8]) -> Change {
        .claims { request, parties in
            let nonce = request.value("nonce")?.stringValue ?? ""
            var crypto = request.value("jwe_crypto")?.objectValue ?? [:]
            crypto["apv"] = .string(Base64.encodeURL(build(parties.mac, nonce)))
            request.set("jwe_crypto", .object(crypto))
        }
    }

    static func field(_ bytes: [UInt8]) -> [UInt8] {
        withUnsafeBytes(of: UInt32(bytes.count).bigEndian, Array.init) + bytes
    }

    static let grant = PlatformSSOGateway.tokenGrant

    static let rows: [Row] = [
        Row(name: "valid (assertion=)", status: 200, error: nil, nonceSpent: true, change: .claims { _, _ in }),
        Row(name: "valid (request=, macOS 13)", status: 200, error: nil, nonceSpent: true,
            change: .body { "platform_sso_version=1.0&grant_type=\(grant)&request=\($0)" }),
        Row(name: "valid: iat and exp as numbers", status: 200, error: nil, nonceSpent: true, change: .claims { request, _ in
            request.set("iat", .integer(request.time("iat")))
            request.set("exp", .integer(request.time("exp")))
        }),
        Row(name: "valid: aud with query and fragment", status: 200, error: nil, nonceSpent: true,
            change: claim("aud", .string(PlatformSSOGateway.audience + "?tenant=a#x"))),
        Row(name: "valid: aud the refresh URL", status: 200, error: nil, nonceSpent: true,
            change: claim("aud", "https://gateway.test/psso/refresh")),
        Row(name: "valid: aud an array", status: 200, error: nil, nonceSpent: true,
            change: claim("aud", ["https://other.test", .string(PlatformSSOGateway.audience)])),
        Row(name: "valid: kid url-safe, unpadded", status: 200, error: nil, nonceSpent: true, change: .claims { request, parties in
            request.setHeader("kid", .string(parties.mac.keyID.urlSafe))
        }),
        Row(name: "valid: iat at now + skew", status: 200, error: nil, nonceSpent: true, change: .claims { request, _ in
            request.set("iat", .string(String(request.time("iat") + 60)))
            request.set("exp", .string(String(request.time("iat") + 300)))
        }),

        Row(name: "form: grant_type missing", status: 400, error: "invalid_request", change: .body { "assertion=\($0)" }),
        Row(name: "form: other grant_type", status: 400, error: "unsupported_grant_type",
            change: .body { "grant_type=password&assertion=\($0)" }),
        Row(name: "form: no JWS", status: 400, error: "invalid_request", change: .body { _ in "grant_type=\(grant)" }),
        Row(name: "form: assertion and request", status: 400, error: "invalid_request",
            change: .body { "grant_type=\(grant)&assertion=\($0)&request=\($0)" }),
        Row(name: "form: bad escape", status: 400, error: "invalid_request", change: .body { "grant_type=\(grant)&assertion=%zz\($0)" }),
        Row(name: "form: empty", status: 400, error: "invalid_request", change: .body { _ in "" }),
        Row(name: "form: not a JWS", status: 400, error: "invalid_request", change: .body { _ in "grant_type=\(grant)&assertion=abc" }),

        Row(name: "typ: login request", status: 400, error: "unsupported_grant_type",
            change: header("typ", "platformsso-login-request+jwt")),
        Row(name: "typ: key request", status: 400, error: "unsupported_grant_type", change: header("typ", "platformsso-key-request+jwt")),
        Row(name: "typ: missing", status: 400, error: "unsupported_grant_type", change: header("typ", nil)),
        Row(name: "alg: ES384", status: 400, error: "invalid_request", change: header("alg", "ES384")),
        Row(name: "alg: none", status: 400, error: "invalid_request", change: header("alg", "none")),
        Row(name: "kid: missing", status: 400, error: "invalid_request", change: header("kid", nil)),
        Row(name: "kid: not 32 bytes", status: 400, error: "invalid_request", change: header("kid", "AAAA")),
        Row(name: "kid: unregistered key", status: 401, error: "invalid_grant", change: .jws { request, parties in
            var request = request
            request.setHeader("kid", .string(parties.stranger.keyID.canonical))
            return try request.signed(with: parties.stranger.signingKey)
        }),
        Row(name: "signature: another key", status: 401, error: "invalid_grant",
            change: .jws { request, parties in try request.signed(with: parties.other.signingKey) }),
        Row(name: "signature: DER", status: 400, error: "invalid_request", change: .jws { request, parties in
            let parts = try request.signed(by: parties.mac).split(separator: ".")
            let der = try parties.mac.signingKey.signature(for: Array("\(parts[0]).\(parts[1])".utf8))
            return "\(parts[0]).\(parts[1]).\(Base64.encodeURL(der))"
        }),
        Row(name: "signature: 63 bytes", status: 400, error: "invalid_request", change: .jws { request, parties in
            let parts = try request.signed(by: parties.mac).split(separator: ".")
            return "\(parts[0]).\(parts[1]).\(Base64.encodeURL(Array(Base64.decodeURL(String(parts[2]))!.prefix(63))))"
        }),

        Row(name: "client_id: wrong", status: 400, error: "invalid_request", change: claim("client_id", "other-client")),
        Row(name: "client_id: missing", status: 400, error: "invalid_request", change: claim("client_id", nil)),
        Row(name: "iss: wrong", status: 400, error: "invalid_request", change: claim("iss", "other-client")),
        Row(name: "iss: missing", status: 400, error: "invalid_request", change: claim("iss", nil)),
        Row(name: "aud: another URL", status: 400, error: "invalid_request", change: claim("aud", "https://gateway.test/psso/tokens")),
        Row(name: "aud: other scheme", status: 400, error: "invalid_request", change: claim("aud", "http://gateway.test/psso/token")),
        Row(name: "aud: missing", status: 400, error: "invalid_request", change: claim("aud", nil)),
        Row(name: "aud: a number", status: 400, error: "invalid_request", change: claim("aud", 7)),
        Row(name: "iat: after now + skew", status: 400, error: "invalid_request", change: .claims { request, _ in
            request.set("iat", .string(String(request.time("iat") + 61)))
            request.set("exp", .string(String(request.time("iat") + 300)))
        }),
        Row(name: "iat: missing", status: 400, error: "invalid_request", change: claim("iat", nil)),
        Row(name: "iat: not numeric", status: 400, error: "invalid_request", change: claim("iat", "yesterday")),
        Row(name: "iat: signed string", status: 400, error: "invalid_request", change: claim("iat", "-1")),
        Row(name: "exp: before now - skew", status: 400, error: "invalid_request", change: .claims { request, _ in
            request.set("exp", .string(String(request.time("iat") - 61)))
            request.set("iat", .string(String(request.time("iat") - 200)))
        }),
        Row(name: "exp: missing", status: 400, error: "invalid_request", change: claim("exp", nil)),
        Row(name: "exp - iat over 5 min + skew", status: 400, error: "invalid_request", change: .claims { request, _ in
            request.set("exp", .string(String(request.time("iat") + 361)))
        }),
        Row(name: "scope: no openid", status: 400, error: "invalid_request", change: claim("scope", "offline_access urn:apple:platformsso")),
        Row(name: "scope: missing", status: 400, error: "invalid_request", change: claim("scope", nil)),
        Row(name: "grant_type claim: other", status: 400, error: "invalid_request", change: claim("grant_type", "password")),
        Row(name: "grant_type claim: missing", status: 400, error: "invalid_request", change: claim("grant_type", nil)),
        Row(name: "nonce: missing", status: 400, error: "invalid_request", change: claim("nonce", nil)),
        Row(name: "request_nonce: missing", status: 400, error: "invalid_request", change: claim("request_nonce", nil)),
        Row(name: "request_nonce: not a string", status: 400, error: "invalid_request", change: claim("request_nonce", 5)),
        Row(name: "refresh_token: missing", status: 400, error: "invalid_request", change: claim("refresh_token", nil)),
        Row(name: "jwe_crypto: missing", status: 400, error: "invalid_request", change: claim("jwe_crypto", nil)),
        Row(name: "jwe_crypto.alg: other", status: 400, error: "invalid_request", change: crypto("alg", "RSA-OAEP")),
        Row(name: "jwe_crypto.enc: other", status: 400, error: "invalid_request", change: crypto("enc", "A128GCM")),
        Row(name: "jwe_crypto.apv: missing", status: 400, error: "invalid_request", change: crypto("apv", nil)),
        Row(name: "apv: another encryption key", status: 400, error: "invalid_request", change: apv { _, nonce in
            ApplePartyInfo.partyVInfo(encryptionKey: try! P256.PrivateKey().publicKey, nonce: Array(nonce.utf8))
        }),
        Row(name: "apv: another nonce", status: 400, error: "invalid_request", change: apv { mac, _ in
            ApplePartyInfo.partyVInfo(encryptionKey: mac.encryptionKey.publicKey, nonce: Array("other".utf8))
        }),
        Row(name: "apv: label APPLE", status: 400, error: "invalid_request", change: apv { mac, nonce in
            field(Array("APPLE".utf8)) + field(mac.encryptionKey.publicKey.x963Representation) + field(Array(nonce.utf8))
        }),

        Row(name: "server nonce: unknown", status: 400, error: "invalid_grant", change: claim("request_nonce", "never-issued")),
        Row(name: "refresh token: unknown", status: 401, error: "invalid_grant", nonceSpent: true,
            change: claim("refresh_token", .string(PlatformSSORefreshToken.newFamily().text))),
        Row(name: "refresh token: malformed", status: 401, error: "invalid_grant", nonceSpent: true, change: claim("refresh_token", "abc")),
        Row(name: "refresh token: another device's", status: 401, error: "invalid_grant", nonceSpent: true,
            change: .claims { request, parties in request.set("refresh_token", .string(parties.otherToken)) }),
    ]

    @Test func everyCheckHasItsStatusAndCode() throws {
        let sso = try PlatformSSOGateway()
        defer { sso.stop() }
        var (mac, token) = try sso.enrolledMac()
        let (other, otherToken) = try sso.enrolledMac(subject: "user-7")
        let parties = Parties(mac: mac, other: other, otherToken: otherToken, stranger: try sso.newMac())
        for row in Self.rows {
            let nonce = try sso.nonce()
            var request = sso.request(mac, token: token, nonce: nonce)
            let body: String
            switch row.change {
            case .claims(let change):
                change(&request, parties)
                body = String(decoding: PlatformSSOGateway.form(try request.signed(by: mac)), as: UTF8.self)
            case .jws(let build):
                body = String(decoding: PlatformSSOGateway.form(try build(request, parties)), as: UTF8.self)
            case .body(let build):
                body = build(try request.signed(by: mac))
            }
            let before = try sso.currentDigest(ofFamilyOf: token)
            let response = try sso.post(Array(body.utf8))
            #expect(response.status == row.status, "\(row.name): \(response.text)")
            #expect(response.oauthError == row.error, "\(row.name): \(response.text)")
            #expect(response.header("Cache-Control") == "no-store", "\(row.name)")
            #expect(response.header("X-Request-ID")?.isEmpty == false, "\(row.name)")
            #expect(try sso.nonceState(nonce).hasPrefix("used:") == row.nonceSpent, "\(row.name): nonce")
            if row.status == 200 {
                mac = parties.mac
                token = try sso.login(response, mac, request).refreshToken
            } else {
                #expect(response.json["error_description"] is String, "\(row.name)")
                #expect(response.header("X-Request-ID") == response.json["requestId"] as? String, "\(row.name)")
                #expect(try sso.currentDigest(ofFamilyOf: token) == before, "\(row.name): nothing rotated")
                #expect(try !sso.familyRevoked(token), "\(row.name): family intact")
            }
        }
        // After all refusals the Mac's own token still refreshes.
        _ = try sso.rotate(mac, token: token)
    }
}

extension MacRefreshRequest {
    /// Sets (or with nil removes) a claim, keeping the member order.
    mutating func set(_ name: String, _ value: JSONValue?) {
        claims = Self.setting(claims, name, value)
    }

    mutating func setHeader(_ name: String, _ value: JSONValue?) {
        header = Self.setting(header, name, value)
    }

    func value(_ name: String) -> JSONValue? { claims.first { $0.0 == name }?.1 }

    /// A time claim as the Mac wrote it (a numeric string).
    func time(_ name: String) -> Int64 { Int64(value(name)?.stringValue ?? "") ?? value(name)?.integerValue ?? 0 }

    private static func setting(_ members: [(String, JSONValue)], _ name: String, _ value: JSONValue?) -> [(String, JSONValue)] {
        var members = members
        if let index = members.firstIndex(where: { $0.0 == name }) {
            if let value { members[index].1 = value } else { members.remove(at: index) }
        } else if let value {
            members.append((name, value))
        }
        return members
    }
}
