import AGCrypto
import AGFormats
import AGJOSE
import Testing

/// Replaces segment `index` of a compact token.
func replacingSegment(_ index: Int, of token: String, with segment: String) -> String {
    var parts = token.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
    parts[index] = segment
    return parts.joined(separator: ".")
}

/// A compact JWE whose header is `header` (JSON text) and whose other segments come from `token`.
func withHeader(_ header: String, _ token: String) -> String {
    replacingSegment(0, of: token, with: Base64.encodeURL(Array(header.utf8)))
}

@Suite("JWE ECDH-ES + A256GCM")
struct JWETests {
    static let recipient = try! P256.PrivateKey()
    static let plaintext = Array(#"{"id_token":"x","token_type":"Bearer"}"#.utf8)
    static let apu = Array("party u".utf8), apv = Array("party v".utf8)

    static func token(plaintext: [UInt8] = plaintext, extraHeader: [String: JSONValue] = [:]) throws -> String {
        try JWECompact.encrypt(plaintext, to: recipient.publicKey, ephemeralKey: try P256.PrivateKey(), partyUInfo: apu,
                               partyVInfo: apv, keyID: "enc-1", type: "platformsso-login-response+jwt",
                               extraHeader: extraHeader)
    }

    @Test("a built JWE decrypts, and its header carries exactly what was asked", arguments: [0, 1, 100, 5000])
    func roundTrip(count: Int) throws {
        let plaintext = SecureRandom.bytes(count: count)
        let token = try Self.token(plaintext: plaintext)
        let jwe = try JWECompact(parsing: token)
        #expect(try jwe.decrypt(with: Self.recipient) == plaintext)
        #expect(try jwe.decrypt(with: Self.recipient, expectedPartyVInfo: Self.apv) == plaintext)
        #expect(jwe.encryptedKey.isEmpty && jwe.iv.count == 12 && jwe.tag.count == 16 && jwe.ciphertext.count == count)
        #expect(token.split(separator: ".", omittingEmptySubsequences: false)[1].isEmpty)
        #expect(Set(jwe.header.members.keys) == ["alg", "enc", "epk", "apu", "apv", "kid", "typ"])
        #expect(jwe.header.algorithm == "ECDH-ES" && jwe.header.encryption == "A256GCM")
        #expect(jwe.header.keyID == "enc-1" && jwe.header.type == "platformsso-login-response+jwt")
        #expect(jwe.header.partyUInfo == Self.apu && jwe.header.partyVInfo == Self.apv)
        #expect(Set(jwe.header.members["epk"]!.objectValue!.keys) == ["kty", "crv", "x", "y"])
        #expect(jwe.protectedHeader == Array(token.split(separator: ".")[0].utf8))
    }

    @Test("two encryptions of one message share neither ephemeral key nor IV")
    func fresh() throws {
        let first = try JWECompact(parsing: try Self.token()), second = try JWECompact(parsing: try Self.token())
        #expect(first.header.ephemeralPublicKey != second.header.ephemeralPublicKey)
        #expect(first.iv != second.iv)
    }

    @Test("without apu and apv the header omits them and the KDF uses empty values")
    func noPartyInfo() throws {
        let token = try JWECompact.encrypt(Self.plaintext, to: Self.recipient.publicKey, ephemeralKey: try P256.PrivateKey(),
                                           partyUInfo: nil, partyVInfo: nil, keyID: nil, type: nil)
        let jwe = try JWECompact(parsing: token)
        #expect(Set(jwe.header.members.keys) == ["alg", "enc", "epk"])
        #expect(try jwe.decrypt(with: Self.recipient) == Self.plaintext)
        #expect(throws: JWEError.decryptionFailed) { try jwe.decrypt(with: Self.recipient, expectedPartyVInfo: [1]) }
    }

    @Test("extra header members cannot replace the algorithm members")
    func extraHeaderCannotOverride() throws {
        let token = try Self.token(extraHeader: ["alg": "dir", "enc": "A128GCM", "zip": "DEF", "crit": ["x"], "cty": "JWT"])
        let jwe = try JWECompact(parsing: token)
        #expect(jwe.header.algorithm == "ECDH-ES" && jwe.header.encryption == "A256GCM")
        #expect(jwe.header.members["cty"] == "JWT")
        #expect(try jwe.decrypt(with: Self.recipient) == Self.plaintext)
    }

    @Test("the wrong recipient key, a wrong apv, or any altered segment fails decryption")
    func tampering() throws {
        let token = try Self.token()
        let jwe = try JWECompact(parsing: token)
        #expect(throws: JWEError.decryptionFailed) { try jwe.decrypt(with: try P256.PrivateKey()) }
        #expect(throws: JWEError.partyVInfoMismatch) { try jwe.decrypt(with: Self.recipient, expectedPartyVInfo: [1, 2]) }
        let parts = token.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        for index in [2, 3, 4] {
            let bytes = Base64.decodeURL(parts[index])!
            for bit in stride(from: 0, to: bytes.count * 8, by: 5) {
                let altered = replacingSegment(index, of: token, with: Base64.encodeURL(flippingBit(bit, of: bytes)))
                #expect(throws: JWEError.decryptionFailed) { try JWECompact(parsing: altered).decrypt(with: Self.recipient) }
            }
        }
        // A semantically equal header spelled differently changes the associated data.
        let header = try JSONValue(parsing: Base64.decodeURL(parts[0])!)
        let respelled = Base64.encodeURL(Array(("  " + header.serializedString()).utf8))
        #expect(throws: JWEError.decryptionFailed) {
            try JWECompact(parsing: replacingSegment(0, of: token, with: respelled)).decrypt(with: Self.recipient)
        }
        // Another apu changes the key.
        var members = header.objectValue!
        members["apu"] = .string(Base64.encodeURL([9]))
        #expect(throws: JWEError.decryptionFailed) {
            try JWECompact(parsing: withHeader(JSONValue.object(members).serializedString(), token)).decrypt(with: Self.recipient)
        }
    }

    @Test("headers and structures outside ECDH-ES + A256GCM are refused with the right error")
    func refusals() throws {
        let token = try Self.token()
        let parts = token.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        let original = try JSONValue(parsing: Base64.decodeURL(parts[0])!).objectValue!
        func header(_ changes: [String: JSONValue?]) -> String {
            var members = original
            for (name, value) in changes { members[name] = value }
            return withHeader(JSONValue.object(members).serializedString(), token)
        }
        let epk = original["epk"]!.objectValue!
        var offCurve = epk
        offCurve["y"] = epk["x"]
        let parseCases: [(String, String, JWEError)] = [
            ("four segments", parts.prefix(4).joined(separator: "."), .malformed("expected five dot-separated segments")),
            ("six segments", token + ".", .malformed("expected five dot-separated segments")),
            ("a JWS", "a.b.c", .malformed("expected five dot-separated segments")),
            ("empty header", replacingSegment(0, of: token, with: ""), .malformed("empty header, IV or tag segment")),
            ("empty IV", replacingSegment(2, of: token, with: ""), .malformed("empty header, IV or tag segment")),
            ("empty tag", replacingSegment(4, of: token, with: ""), .malformed("empty header, IV or tag segment")),
            ("padded tag", token + "==", .malformed("segment is not unpadded base64url")),
            ("96-byte IV", replacingSegment(2, of: token, with: Base64.encodeURL([UInt8](repeating: 1, count: 96))), .malformed("the IV must be 96 bits")),
            ("16-byte IV", replacingSegment(2, of: token, with: Base64.encodeURL([UInt8](repeating: 1, count: 16))), .malformed("the IV must be 96 bits")),
            ("12-byte tag", replacingSegment(4, of: token, with: Base64.encodeURL([UInt8](repeating: 1, count: 12))), .malformed("the tag must be 128 bits")),
            ("header not JSON", withHeader("nope", token), .malformed("header is not a JSON object")),
            ("header an array", withHeader("[]", token), .malformed("header is not a JSON object")),
            ("no alg", header(["alg": nil]), .malformed("header has no alg string")),
            ("no enc", header(["enc": nil]), .malformed("header has no enc string")),
            ("kid a number", header(["kid": 1]), .malformed("kid is not a string")),
            ("apu padded", header(["apu": "AQ=="]), .malformed("apu is not unpadded base64url")),
            ("apv a number", header(["apv": 3]), .malformed("apv is not a string")),
            ("crit", header(["crit": ["exp"]]), .unsupportedHeader("crit")),
            ("zip", header(["zip": "DEF"]), .unsupportedHeader("zip")),
            ("epk off the curve", header(["epk": .object(offCurve)]), .invalidKey("epk: the point is not on P-256")),
            ("epk P-384", header(["epk": .object(epk.merging(["crv": "P-384"]) { $1 })]), .invalidKey("epk: crv must be P-256")),
            ("epk a string", header(["epk": "x"]), .invalidKey("epk: a JWK must be a JSON object")),
            ("too long", token + String(repeating: "A", count: 70_000), .malformed("token longer than 65536 bytes")),
        ]
        for (name, text, expected) in parseCases {
            #expect(throws: expected, "\(name)") { try JWECompact(parsing: text) }
        }
        let decryptCases: [(String, String, JWEError)] = [
            ("ECDH-ES+A256KW", header(["alg": "ECDH-ES+A256KW"]), .unsupportedAlgorithm("ECDH-ES+A256KW")),
            ("dir", header(["alg": "dir"]), .unsupportedAlgorithm("dir")),
            ("A128GCM", header(["enc": "A128GCM"]), .unsupportedAlgorithm("A128GCM")),
            ("A256CBC-HS512", header(["enc": "A256CBC-HS512"]), .unsupportedAlgorithm("A256CBC-HS512")),
            ("no epk", header(["epk": nil]), .invalidKey("epk is missing")),
            ("an encrypted key", replacingSegment(1, of: token, with: "AAAA"), .malformed("direct key agreement has no encrypted key")),
        ]
        for (name, text, expected) in decryptCases {
            #expect(throws: expected, "\(name)") { try JWECompact(parsing: text).decrypt(with: Self.recipient) }
        }
    }

    @Test("keys with a leading zero byte in x or y survive epk, JWK and encryption both ways")
    func shortCoordinates() throws {
        var seen = (x: false, y: false)
        var attempts = 0
        while !(seen.x && seen.y), attempts < 5_000 {
            attempts += 1
            let key = try P256.PrivateKey()
            let shortX = key.publicKey.x[0] == 0, shortY = key.publicKey.y[0] == 0
            guard shortX || shortY else { continue }
            seen = (seen.x || shortX, seen.y || shortY)
            let jwk = key.publicKey.jwk
            #expect(b64url(jwk["x"]!.stringValue!).count == 32 && b64url(jwk["y"]!.stringValue!).count == 32)
            #expect(try P256.PublicKey(jwk: jwk) == key.publicKey)
            // As the recipient.
            let toShort = try JWECompact.encrypt(Self.plaintext, to: key.publicKey, ephemeralKey: try P256.PrivateKey(),
                                                 partyUInfo: nil, partyVInfo: nil, keyID: nil, type: nil)
            #expect(try JWECompact(parsing: toShort).decrypt(with: key) == Self.plaintext)
            // As the ephemeral key: its epk must keep 32-byte coordinates.
            let fromShort = try JWECompact.encrypt(Self.plaintext, to: Self.recipient.publicKey, ephemeralKey: key,
                                                   partyUInfo: key.publicKey.x963Representation, partyVInfo: nil,
                                                   keyID: nil, type: nil)
            let parsed = try JWECompact(parsing: fromShort)
            #expect(parsed.header.ephemeralPublicKey == key.publicKey)
            #expect(parsed.header.partyUInfo == key.publicKey.x963Representation)
            #expect(try parsed.decrypt(with: Self.recipient) == Self.plaintext)
        }
        #expect(seen.x && seen.y, "no short coordinate in \(attempts) keys")
    }
}

private func b64url(_ text: String) -> [UInt8] { Base64.decodeURL(text)! }

func flippingBit(_ bit: Int, of bytes: [UInt8]) -> [UInt8] {
    var copy = bytes
    copy[bit / 8] ^= 1 << UInt8(bit % 8)
    return copy
}
