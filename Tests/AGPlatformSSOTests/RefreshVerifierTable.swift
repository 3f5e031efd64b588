import AGCrypto
import AGFormats
import AGPlatformSSO

private let now = MacRefreshRequest.now
private let apvOK = ApplePartyInfo.partyVInfo(encryptionKey: Verification.device.encryptionKey.publicKey,
                                              nonce: Array("A978348D-DEDF-4AF2-94D4-FCC60B6736D0".utf8))
private func field(_ bytes: [UInt8]) -> [UInt8] { PartyInfoCases.field(bytes) }
private let digest = SHA256.hash(Verification.device.signingKey.publicKey.x963Representation)

/// 400 invalid_request, 401 invalid_grant, 400 unsupported_grant_type.
private func bad(_ name: String, _ change: @escaping @Sendable (inout MacRefreshRequest) throws -> Void) -> VerifierCase {
    .refused(name, 400, "invalid_request", change)
}
private func unauthorised(_ name: String, _ change: @escaping @Sendable (inout MacRefreshRequest) throws -> Void) -> VerifierCase {
    .refused(name, 401, "invalid_grant", change)
}
private func unsupported(_ name: String, _ change: @escaping @Sendable (inout MacRefreshRequest) throws -> Void) -> VerifierCase {
    .refused(name, 400, "unsupported_grant_type", change)
}
private func good(_ name: String, _ change: @escaping @Sendable (inout MacRefreshRequest) throws -> Void) -> VerifierCase {
    .accepted(name, change)
}
private func times(_ iat: JSONValue?, _ exp: JSONValue?) -> @Sendable (inout MacRefreshRequest) -> Void {
    { $0.claims["iat"] = iat; $0.claims["exp"] = exp }
}

/// The rows of the verification table, by the part of the request they change.
enum VerifierTable {
    static let all: [VerifierCase] = header + signature + payload + identity + time + grant + crypto

    static let header: [VerifierCase] = [
        good("Apple's request as is") { _ in },
        good("kid standard base64 without padding") { $0.header["kid"] = .string(String(Base64.encode(digest).dropLast())) },
        good("kid url-safe with padding") { $0.header["kid"] = .string(Base64.encodeURL(digest) + "=") },
        good("kid url-safe without padding") { $0.header["kid"] = .string(Base64.encodeURL(digest)) },
        good("typ in capitals") { $0.header["typ"] = "PLATFORMSSO-REFRESH-REQUEST+JWT" },
        good("typ with application/ (RFC 7515 section 4.1.9)") { $0.header["typ"] = "application/platformsso-refresh-request+jwt" },
        good("x5c present, ignored") { $0.header["x5c"] = "MIIBg...nFg==" },
        good("custom header claims") { $0.header["custom"] = ["a": 1] },
        good("compact JSON instead of pretty") { $0.compactJSON = true },
        good("slashes escaped as \\/ (in aud, and in kid when it has one)") { $0.escapeSlashes = true },
        unsupported("typ missing") { $0.header["typ"] = nil },
        unsupported("typ JWT (a login request)") { $0.header["typ"] = "JWT" },
        unsupported("typ login request") { $0.header["typ"] = "platformsso-login-request+jwt" },
        unsupported("typ key request") { $0.header["typ"] = "platformsso-key-request+jwt" },
        unsupported("typ with a suffix") { $0.header["typ"] = "platformsso-refresh-request+jwt2" },
        unsupported("typ under another top-level type") { $0.header["typ"] = "text/platformsso-refresh-request+jwt" },
        bad("typ a number") { $0.header["typ"] = 1 },
        bad("alg missing") { $0.header["alg"] = nil },
        bad("alg none") { $0.header["alg"] = "none" },
        bad("alg HS256") { $0.header["alg"] = "HS256" },
        bad("alg RS256") { $0.header["alg"] = "RS256" },
        bad("alg ES384") { $0.header["alg"] = "ES384" },
        bad("alg es256") { $0.header["alg"] = "es256" },
        bad("kid missing") { $0.header["kid"] = nil },
        bad("kid a number") { $0.header["kid"] = 7 },
        bad("kid not base64") { $0.header["kid"] = "device-1" },
        bad("kid of 31 bytes") { $0.header["kid"] = .string(Base64.encode(digest.dropLast())) },
        bad("kid mixing alphabets") { $0.header["kid"] = .string(Base64.encode(digest).replacingOccurrences(of: "=", with: "-")) },
        bad("crit header") { $0.header["crit"] = ["exp"] },
        .refused("kid of an unregistered key", 401, "invalid_grant") { $0.header["kid"] = .string(Base64.encode([UInt8](repeating: 1, count: 32))) },
        unauthorised("kid of another registered device") { $0.header["kid"] = .string(Verification.otherDevice.kid) },
    ]

    static let signature: [VerifierCase] = [
        good("a high-S signature (macOS does not normalise)") { request in
            request.signatureTransform = { raw in Array(raw[0..<32]) + highS(Array(raw[32...])) }
        },
        bad("DER signature") { $0.signatureTransform = { try P256.derSignature(fromRaw: $0) } },
        bad("63-byte signature") { $0.signatureTransform = { Array($0.dropLast()) } },
        bad("65-byte signature") { $0.signatureTransform = { $0 + [0] } },
        bad("32-byte signature") { $0.signatureTransform = { Array($0.prefix(32)) } },
        bad("empty signature") { $0.signatureTransform = { _ in [] } },
        unauthorised("signed by another key") { $0.signingKey = Verification.otherDevice.signingKey },
        unauthorised("a flipped bit in the signature") { $0.signatureTransform = { raw in var copy = raw; copy[40] ^= 4; return copy } },
        unauthorised("all-zero signature") { $0.signatureTransform = { _ in [UInt8](repeating: 0, count: 64) } },
        unauthorised("r and s swapped") { $0.signatureTransform = { Array($0[32...] + $0[0..<32]) } },
    ]

    static let payload: [VerifierCase] = [
        bad("request_nonce missing") { $0.claims["request_nonce"] = nil },
        bad("request_nonce a number") { $0.claims["request_nonce"] = 12 },
        bad("request_nonce empty") { $0.claims["request_nonce"] = "" },
        bad("request_nonce of 513 bytes") { $0.claims["request_nonce"] = .string(String(repeating: "n", count: 513)) },
        good("request_nonce of 512 bytes") { $0.claims["request_nonce"] = .string(String(repeating: "n", count: 512)) },
        bad("refresh_token missing") { $0.claims["refresh_token"] = nil },
        bad("refresh_token an object") { $0.claims["refresh_token"] = ["t": "x"] },
        bad("refresh_token empty") { $0.claims["refresh_token"] = "" },
        bad("refresh_token of 513 bytes") { $0.claims["refresh_token"] = .string(String(repeating: "r", count: 513)) },
        good("custom body claims, no sub and no username") { $0.claims["custom"] = "x"; $0.claims["sub"] = nil },
    ]

    static let identity: [VerifierCase] = [
        bad("client_id missing") { $0.claims["client_id"] = nil },
        bad("client_id wrong") { $0.claims["client_id"] = "aaff1524-fa35-40c5-94e3-2b233c5f2966" },
        bad("client_id a number") { $0.claims["client_id"] = 1 },
        bad("client_id in capitals") { $0.claims["client_id"] = "AAFF1524-FA35-40C5-94E3-2B233C5F2965" },
        bad("iss missing") { $0.claims["iss"] = nil },
        bad("iss wrong") { $0.claims["iss"] = "https://idp.example.com" },
        bad("aud missing") { $0.claims["aud"] = nil },
        bad("aud another host") { $0.claims["aud"] = "https://other.example.com/psso/token" },
        bad("aud a prefix") { $0.claims["aud"] = "https://gateway.example.com/psso/tok" },
        bad("aud with a trailing slash") { $0.claims["aud"] = "https://gateway.example.com/psso/token/" },
        bad("aud http") { $0.claims["aud"] = "http://gateway.example.com/psso/token" },
        bad("aud a number") { $0.claims["aud"] = 5 },
        bad("aud an empty array") { $0.claims["aud"] = [] },
        bad("aud an array with a number") { $0.claims["aud"] = [.string(MacRefreshRequest.audience), 5] },
        bad("aud an array of other URLs") { $0.claims["aud"] = ["https://a.example", "https://b.example"] },
        good("aud with a query") { $0.claims["aud"] = .string(MacRefreshRequest.audience + "?tenant=x") },
        good("aud with a fragment") { $0.claims["aud"] = .string(MacRefreshRequest.audience + "#frag") },
        good("aud the refresh URL (configured with a query)") { $0.claims["aud"] = "https://gateway.example.com/psso/refresh" },
        good("aud an array containing this endpoint") { $0.claims["aud"] = ["https://a.example", .string(MacRefreshRequest.audience)] },
    ]

    static let time: [VerifierCase] = [
        good("iat and exp as numbers") { times(.integer(now), .integer(now + 300))(&$0) },
        good("iat and exp as fractional numbers") { times(.double(Double(now) + 0.5), .double(Double(now) + 300.25))(&$0) },
        good("iat and exp as fractional strings") { times(.string("\(now).5"), .string("\(now + 300).5"))(&$0) },
        good("iat at now + skew") { times(.string("\(now + 60)"), .string("\(now + 360)"))(&$0) },
        bad("iat at now + skew + 1") { times(.string("\(now + 61)"), .string("\(now + 361)"))(&$0) },
        good("exp at now − skew + 1") { times(.integer(now - 100), .integer(now - 59))(&$0) },
        bad("exp at now − skew") { times(.integer(now - 100), .integer(now - 60))(&$0) },
        bad("exp long past") { times(.integer(now - 1000), .integer(now - 700))(&$0) },
        good("exp − iat = 5 min + skew") { times(.integer(now - 100), .integer(now + 260))(&$0) },
        bad("exp − iat = 5 min + skew + 1") { times(.integer(now - 100), .integer(now + 261))(&$0) },
        bad("exp a day out") { times(.integer(now), .integer(now + 86_400))(&$0) },
        bad("exp equal to iat") { times(.integer(now), .integer(now))(&$0) },
        bad("exp before iat") { times(.integer(now), .integer(now - 10))(&$0) },
        bad("iat missing") { $0.claims["iat"] = nil },
        bad("exp missing") { $0.claims["exp"] = nil },
        bad("iat not numeric") { $0.claims["iat"] = "yesterday" },
        bad("iat with an exponent") { $0.claims["iat"] = "1.7e9" },
        bad("iat negative string") { $0.claims["iat"] = .string("-\(now)") },
        bad("iat with a space") { $0.claims["iat"] = .string(" \(now)") },
        bad("iat with a plus") { $0.claims["iat"] = .string("+\(now)") },
        bad("iat empty string") { $0.claims["iat"] = "" },
        bad("iat nan") { $0.claims["iat"] = "nan" },
        bad("iat a trailing dot") { $0.claims["iat"] = .string("\(now).") },
        bad("exp a boolean") { $0.claims["exp"] = true },
        bad("exp an array") { $0.claims["exp"] = [.integer(now + 300)] },
        bad("exp of 21 digits") { $0.claims["exp"] = .string(String(repeating: "9", count: 21)) },
        good("nbf at now + skew") { $0.claims["nbf"] = .integer(now + 60) },
        bad("nbf at now + skew + 1") { $0.claims["nbf"] = .integer(now + 61) },
        bad("nbf not numeric") { $0.claims["nbf"] = "soon" },
    ]

    static let grant: [VerifierCase] = [
        good("scope openid alone") { $0.claims["scope"] = "openid" },
        bad("scope missing") { $0.claims["scope"] = nil },
        bad("scope without openid") { $0.claims["scope"] = "offline_access urn:apple:platformsso" },
        bad("scope openidx") { $0.claims["scope"] = "openidx offline_access" },
        bad("scope OPENID") { $0.claims["scope"] = "OPENID" },
        bad("scope an array") { $0.claims["scope"] = ["openid"] },
        bad("grant_type missing") { $0.claims["grant_type"] = nil },
        bad("grant_type password") { $0.claims["grant_type"] = "password" },
        bad("grant_type jwt-bearer") { $0.claims["grant_type"] = "urn:ietf:params:oauth:grant-type:jwt-bearer" },
        bad("nonce missing") { $0.claims["nonce"] = nil },
        bad("nonce empty") { $0.claims["nonce"] = "" },
        bad("nonce a number") { $0.claims["nonce"] = 5 },
    ]

    static let crypto: [VerifierCase] = [
        bad("jwe_crypto missing") { $0.claims["jwe_crypto"] = nil },
        bad("jwe_crypto a string") { $0.claims["jwe_crypto"] = "ECDH-ES" },
        bad("jwe_crypto.alg missing") { $0.setCrypto("alg", nil) },
        bad("jwe_crypto.alg ECDH-ES+A256KW") { $0.setCrypto("alg", "ECDH-ES+A256KW") },
        bad("jwe_crypto.alg RSA-OAEP") { $0.setCrypto("alg", "RSA-OAEP") },
        bad("jwe_crypto.enc missing") { $0.setCrypto("enc", nil) },
        bad("jwe_crypto.enc A128GCM") { $0.setCrypto("enc", "A128GCM") },
        bad("jwe_crypto.apv missing") { $0.setCrypto("apv", nil) },
        bad("jwe_crypto.apv a number") { $0.setCrypto("apv", 1) },
        bad("jwe_crypto.apv padded") { $0.setCrypto("apv", .string(Base64.encodeURL(apvOK) + "=")) },
        bad("jwe_crypto.apv standard alphabet") { $0.setCrypto("apv", .string(Base64.encode(apvOK))) },
        bad("jwe_crypto.apv empty") { $0.setPartyVInfo([]) },
        bad("apv label APPLE") { $0.setPartyVInfo(field(Array("APPLE".utf8)) + Array(apvOK.dropFirst(9))) },
        bad("apv label length too long") { $0.setPartyVInfo([0, 0, 0, 200] + Array(apvOK.dropFirst(4))) },
        bad("apv key 64 bytes") { request in
            request.setPartyVInfo(field(Array("Apple".utf8)) + field(Array(Verification.device.encryptionKey.publicKey.x963Representation.dropFirst()))
                                  + field(Array("A978348D-DEDF-4AF2-94D4-FCC60B6736D0".utf8)))
        },
        bad("apv truncated in the nonce") { $0.setPartyVInfo(Array(apvOK.dropLast())) },
        bad("apv with a trailing byte") { $0.setPartyVInfo(apvOK + [0]) },
        bad("apv without the nonce") { $0.setPartyVInfo(Array(apvOK.prefix(4 + 5 + 4 + 65))) },
        bad("apv nonce differs from the nonce claim") { $0.claims["nonce"] = "B7F1FC32-9121-4E2A-9E32-8417E03675DD" },
        bad("apv key is another device's encryption key") { request in
            request.setPartyVInfo(ApplePartyInfo.partyVInfo(encryptionKey: Verification.otherDevice.encryptionKey.publicKey,
                                                            nonce: Array("A978348D-DEDF-4AF2-94D4-FCC60B6736D0".utf8)))
        },
        bad("apv key is the device's signing key") { request in
            request.setPartyVInfo(ApplePartyInfo.partyVInfo(encryptionKey: Verification.device.signingKey.publicKey,
                                                            nonce: Array("A978348D-DEDF-4AF2-94D4-FCC60B6736D0".utf8)))
        },
    ]
}

/// `n − s`: the other valid spelling of an ECDSA signature.
private func highS(_ s: [UInt8]) -> [UInt8] {
    let order: [UInt8] = [
        0xFF, 0xFF, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x00, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
        0xBC, 0xE6, 0xFA, 0xAD, 0xA7, 0x17, 0x9E, 0x84, 0xF3, 0xB9, 0xCA, 0xC2, 0xFC, 0x63, 0x25, 0x51,
    ]
    var result = [UInt8](repeating: 0, count: 32)
    var borrow = 0
    for index in (0..<32).reversed() {
        let value = Int(order[index]) - Int(s[index]) - borrow
        borrow = value < 0 ? 1 : 0
        result[index] = UInt8((value + 256) % 256)
    }
    return result
}
