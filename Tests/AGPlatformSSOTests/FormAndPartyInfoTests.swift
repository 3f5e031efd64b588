import AGCrypto
import AGFormats
import AGPlatformSSO
import Testing

private func form(_ text: String) throws(FormError) -> URLEncodedForm {
    try URLEncodedForm(parsing: Array(text.utf8))
}

@Suite("Form bodies")
struct FormTests {
    @Test("pairs decode with + as space and %XX in either case", arguments: [
        ("", [:]),
        ("a=1", ["a": "1"]),
        ("a=", ["a": ""]),
        ("a=b+c&d=%41%62%2b%2F%3d", ["a": "b c", "d": "Ab+/="]),
        ("grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer", ["grant_type": "urn:ietf:params:oauth:grant-type:jwt-bearer"]),
        ("grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer", ["grant_type": "urn:ietf:params:oauth:grant-type:jwt-bearer"]),
        ("n%C3%A4me=v%E2%82%AC", ["näme": "v€"]),
        ("a==b", ["a": "=b"]),
        ("x.y-z_~*=a.b.c", ["x.y-z_~*": "a.b.c"]),
        // Split as the WHATWG URL Standard (5.1) splits: empty pieces skipped, a piece without
        // = a name with an empty value (stop 34, independent interop sweep: these were 400).
        ("a=1&&b=2", ["a": "1", "b": "2"]),
        ("&a=1", ["a": "1"]),
        ("a=1&", ["a": "1"]),
        ("&", [:]),
        ("a", ["a": ""]),
        ("grant_type=srv_challenge&flag", ["grant_type": "srv_challenge", "flag": ""]),
        ("=1", ["": "1"]),
    ] as [(String, [String: String])])
    func accepted(body: String, fields: [String: String]) throws {
        #expect(try form(body).fields == fields)
    }

    @Test("malformed bodies are refused with a reason", arguments: [
        ("a=1&a=2", "field a given more than once"),
        ("a=1&%61=2", "field a given more than once"),
        ("a&a=", "field a given more than once"),
        ("a%=1", "% not followed by two hex digits"),
        ("a=%", "% not followed by two hex digits"),
        ("a=%4", "% not followed by two hex digits"),
        ("a=%4g", "% not followed by two hex digits"),
        ("a=%%41", "% not followed by two hex digits"),
        ("a=b c", "raw space, control or non-ASCII byte (encode it as %XX)"),
        ("a=b\n", "raw space, control or non-ASCII byte (encode it as %XX)"),
        ("a=b\u{7F}", "raw space, control or non-ASCII byte (encode it as %XX)"),
        ("a=ä", "raw space, control or non-ASCII byte (encode it as %XX)"),
        ("a=%FF", "a field is not UTF-8"),
        ("a=%C3", "a field is not UTF-8"),
    ])
    func refused(body: String, reason: String) {
        #expect(throws: FormError(reason), "\(body)") { try form(body) }
    }

    @Test("the number of fields is bounded")
    func bounded() throws {
        let body = (0..<33).map { "f\($0)=x" }.joined(separator: "&")
        #expect(throws: FormError("more than 32 fields")) { try form(body) }
        #expect(try form((0..<32).map { "f\($0)=x" }.joined(separator: "&")).fields.count == 32)
    }

    static let jwt = "urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer"

    @Test("the token form takes the JWS from assertion or request", arguments: ["assertion", "request"])
    func tokenForm(field: String) throws {
        let parsed = try PlatformSSOTokenForm(body: Array("platform_sso_version=1.0&grant_type=\(Self.jwt)&\(field)=a.b.c&x=y".utf8))
        #expect(parsed.jws == "a.b.c" && parsed.platformSSOVersion == "1.0")
        #expect(try PlatformSSOTokenForm(body: Array("grant_type=\(Self.jwt)&\(field)=a.b.c".utf8)).platformSSOVersion == nil)
    }

    @Test("token form refusals carry status and OAuth code", arguments: [
        ("", 400, "invalid_request"),
        ("assertion=a.b.c", 400, "invalid_request"),
        ("grant_type=refresh_token&assertion=a.b.c", 400, "unsupported_grant_type"),
        ("grant_type=password&assertion=a.b.c", 400, "unsupported_grant_type"),
        ("grant_type=srv_challenge", 400, "unsupported_grant_type"),
        ("grant_type=\(FormTests.jwt)", 400, "invalid_request"),
        ("grant_type=\(FormTests.jwt)&assertion=", 400, "invalid_request"),
        ("grant_type=\(FormTests.jwt)&assertion=a.b.c&request=a.b.c", 400, "invalid_request"),
        ("grant_type=\(FormTests.jwt)&assertion=a.b.c&assertion=d.e.f", 400, "invalid_request"),
        ("grant_type=\(FormTests.jwt)&assertion=a b", 400, "invalid_request"),
    ])
    func tokenFormRefusals(body: String, status: Int, code: String) {
        do {
            _ = try PlatformSSOTokenForm(body: Array(body.utf8))
            Issue.record("accepted \(body)")
        } catch {
            #expect(error.status == status && error.code == code, "\(body): \(error)")
        }
    }

    @Test("the nonce form wants grant_type=srv_challenge and ignores other fields")
    func nonceForm() throws {
        _ = try PlatformSSONonceForm(body: Array("grant_type=srv_challenge&custom=1".utf8))
        let cases: [(String, OAuthError)] = [
            ("", .invalidRequest("grant_type is missing")),
            ("custom=1", .invalidRequest("grant_type is missing")),
            ("grant_type=refresh_token", .unsupportedGrantType("grant_type must be srv_challenge")),
            ("grant_type=srv_challenge&grant_type=srv_challenge", .invalidRequest("malformed form: field grant_type given more than once")),
            ("grant_type=srv%challenge", .invalidRequest("malformed form: % not followed by two hex digits")),
        ]
        for (body, expected) in cases {
            #expect(throws: expected, "\(body)") { try PlatformSSONonceForm(body: Array(body.utf8)) }
            #expect(expected.status == 400)
        }
    }
}

@Suite("Apple's party infos")
struct PartyInfoTests {
    static let key = PartyInfoCases.key, nonce = PartyInfoCases.nonce

    static func field(_ bytes: [UInt8]) -> [UInt8] { PartyInfoCases.field(bytes) }

    @Test("apv round-trips; apu is APPLE and the epk point")
    func roundTrip() throws {
        let apv = ApplePartyInfo.partyVInfo(encryptionKey: Self.key, nonce: Self.nonce)
        #expect(apv == Self.field(Array("Apple".utf8)) + Self.field(Self.key.x963Representation) + Self.field(Self.nonce))
        let parsed = try ApplePartyInfo.parsePartyVInfo(apv)
        #expect(parsed.encryptionKey == Self.key.x963Representation && parsed.nonce == Self.nonce)
        #expect(ApplePartyInfo.partyUInfo(ephemeralKey: Self.key) == Self.field(Array("APPLE".utf8)) + Self.field(Self.key.x963Representation))
        #expect(try ApplePartyInfo.parsePartyVInfo(Self.field(Array("Apple".utf8)) + Self.field(Self.key.x963Representation) + Self.field([])).nonce == [])
    }

    @Test("every malformed part of apv is refused", arguments: PartyInfoCases.malformed)
    func malformed(name: String, bytes: [UInt8], reason: String) {
        #expect(throws: PartyInfoError(reason), "\(name)") { try ApplePartyInfo.parsePartyVInfo(bytes) }
    }
}

enum PartyInfoCases {
    static let key = AppleVector.shared.encryptionKey.privateKey.publicKey
    static let nonce = Array("DDF68171-409D-4E2C-91F0-9E42D7745365".utf8)

    /// `bytes` with its 32-bit big-endian length in front.
    static func field(_ bytes: [UInt8]) -> [UInt8] {
        let count = UInt32(bytes.count)
        return [UInt8(count >> 24), UInt8(count >> 16 & 0xFF), UInt8(count >> 8 & 0xFF), UInt8(count & 0xFF)] + bytes
    }

    static let malformed: [(String, [UInt8], String)] = {
        let label = field(Array("Apple".utf8)), key = field(PartyInfoCases.key.x963Representation), nonce = field(PartyInfoCases.nonce)
        let good = label + key + nonce
        var compressed = PartyInfoCases.key.x963Representation
        compressed[0] = 0x02
        return [
            ("empty", [], "label: length missing"),
            ("short label length", [0, 0, 0], "label: length missing"),
            ("label length past the end", [0, 0, 0, 9] + Array("Apple".utf8), "label: length 9 exceeds the data"),
            ("huge label length", [0xFF, 0xFF, 0xFF, 0xFF] + Array(good.dropFirst(4)), "label: length 4294967295 exceeds the data"),
            ("APPLE instead of Apple", field(Array("APPLE".utf8)) + key + nonce, "label is not Apple"),
            ("apple", field(Array("apple".utf8)) + key + nonce, "label is not Apple"),
            ("empty label", field([]) + key + nonce, "label is not Apple"),
            ("no key", label, "encryption key: length missing"),
            ("key 64 bytes", label + field(Array(PartyInfoCases.key.x963Representation.dropFirst())) + nonce,
             "encryption key is not a 65-byte uncompressed point"),
            ("key 33 bytes", label + field(Array(compressed.prefix(33))) + nonce, "encryption key is not a 65-byte uncompressed point"),
            ("key without 04", label + field(compressed) + nonce, "encryption key is not a 65-byte uncompressed point"),
            ("key length past the end", label + [0, 0, 0, 65] + Array(PartyInfoCases.key.x963Representation.prefix(10)),
             "encryption key: length 65 exceeds the data"),
            ("no nonce", label + key, "nonce: length missing"),
            ("nonce length past the end", label + key + [0, 0, 0, 40] + PartyInfoCases.nonce, "nonce: length 40 exceeds the data"),
            ("one trailing byte", good + [0], "1 bytes after the nonce"),
            ("a fourth field", good + field([1, 2]), "6 bytes after the nonce"),
        ]
    }()
}
