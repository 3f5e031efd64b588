import AGCrypto
import AGFormats
import AGJOSE
import Testing

/// Builds `header.payload.signature` from raw parts, to forge tokens the signer never makes.
private func token(header: String, payload: String = #"{"sub":"x"}"#, signature: [UInt8]) -> String {
    Base64.encodeURL(Array(header.utf8)) + "." + Base64.encodeURL(Array(payload.utf8)) + "." + Base64.encodeURL(signature)
}

private func signingInput(of token: String) -> [UInt8] {
    Array(token.split(separator: ".").prefix(2).joined(separator: ".").utf8)
}

@Suite("JWS, JWT, JWK")
struct JOSETests {
    static let ecKey = try! P256.PrivateKey()
    static let rsaKey = try! RSAKey.PrivateKey(bits: 2048)
    static let verifier = JWTVerifier(keys: [
        "ec-1": .es256(ecKey.publicKey), "rsa-1": .rs256(rsaKey.publicKey),
    ])
    static let claims: [String: JSONValue] = ["sub": "key", "iat": 1_700_000_000, "exp": 1_700_003_600, "nbf": 1_700_000_000]

    @Test("ES256 and RS256 tokens round-trip", arguments: ["ec-1", "rsa-1"])
    func roundTrip(kid: String) throws {
        let key: JWSSigningKey = kid == "ec-1" ? .es256(Self.ecKey) : .rs256(Self.rsaKey)
        let jwt = try JWTSigner(key: key, keyID: kid).sign(claims: Self.claims)
        let verified = try Self.verifier.verify(jwt)
        #expect(verified.claims == Self.claims)
        #expect(verified.header.keyID == kid)
        #expect(verified.header.type == "JWT")
        #expect(verified.header.algorithm == key.algorithm.rawValue)
        #expect(verified.payload == JSONValue.object(Self.claims).serialized())
        let header = try JSONValue(parsing: Base64.decodeURL(jwt.split(separator: ".")[0])!)
        #expect(header == ["alg": .string(key.algorithm.rawValue), "kid": .string(kid), "typ": "JWT"])
        if kid == "ec-1" { #expect(Base64.decodeURL(jwt.split(separator: ".")[2])?.count == 64) }
    }

    @Test("RFC 7515 appendix A.3 ES256 example verifies")
    func rfc7515() throws {
        let jwk: JSONValue = ["kty": "EC", "crv": "P-256",
                              "x": "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU",
                              "y": "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"]
        let key = try JWSVerificationKey(jwk: jwk)
        let jws = try JWSCompact(parsing: "eyJhbGciOiJFUzI1NiJ9.eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb290Ijp0cnVlfQ.DtEhU3ljbEg8L38VWAfUAqOyKAM6-Xx-F4GawxaepmXFCgfTjDxw5djxLa8ISlSApmWQxfKTUJqPP3-Kg6NU1Q")
        try jws.verify(with: key)
        #expect(try JSONValue(parsing: jws.payload)["iss"] == "joe")
    }

    @Test("forged and malformed tokens are rejected with the right error")
    func rejections() throws {
        let signer = JWTSigner(key: .es256(Self.ecKey), keyID: "ec-1")
        let good = try signer.sign(claims: Self.claims)
        let parts = good.split(separator: ".").map(String.init)
        let esHeader = #"{"alg":"ES256","kid":"ec-1","typ":"JWT"}"#
        let rsSigned = try JWTSigner(key: .rs256(Self.rsaKey), keyID: "rsa-1").sign(claims: Self.claims)

        let forgedNone = token(header: #"{"alg":"none","kid":"ec-1","typ":"JWT"}"#, signature: [0])
        let noneNoSignature = Base64.encodeURL(Array(#"{"alg":"none","typ":"JWT"}"#.utf8)) + "." + parts[1] + "."
        let hmacKey = Self.ecKey.publicKey.x963Representation
        let hsUnsigned = token(header: #"{"alg":"HS256","kid":"ec-1","typ":"JWT"}"#, signature: [])
        let hsInput = signingInput(of: hsUnsigned)
        let hsForged = String(decoding: hsInput, as: UTF8.self) + "." + Base64.encodeURL(HMACSHA256.authenticate(key: hmacKey, data: hsInput))
        // RS256 header pointing at the EC key, and ES256 header pointing at the RSA key.
        let rsOnEC = token(header: #"{"alg":"RS256","kid":"ec-1","typ":"JWT"}"#, signature: Array(repeating: 1, count: 256))
        let esOnRSAUnsigned = token(header: #"{"alg":"ES256","kid":"rsa-1","typ":"JWT"}"#, signature: [])
        let esOnRSA = String(decoding: signingInput(of: esOnRSAUnsigned), as: UTF8.self) + "."
            + Base64.encodeURL(try Self.ecKey.rawSignature(for: signingInput(of: esOnRSAUnsigned)))
        let rsKeyIDSwapped = token(header: #"{"alg":"RS256","kid":"rsa-2","typ":"JWT"}"#, signature: [1])
        let tamperedPayload = parts[0] + "." + Base64.encodeURL(Array(#"{"sub":"other"}"#.utf8)) + "." + parts[2]
        let derSignature = parts[0] + "." + parts[1] + "." + Base64.encodeURL(try P256.derSignature(fromRaw: Base64.decodeURL(parts[2])!))
        func signed(header: String, payload: String = #"{"sub":"x"}"#) throws -> String {
            let unsigned = token(header: header, payload: payload, signature: [])
            return String(decoding: signingInput(of: unsigned), as: UTF8.self) + "."
                + Base64.encodeURL(try Self.ecKey.rawSignature(for: signingInput(of: unsigned)))
        }

        let cases: [(String, String, JOSEError)] = [
            ("alg none", forgedNone, .unsupportedAlgorithm("none")),
            ("alg none, empty signature", noneNoSignature, .malformed("empty segment")),
            ("HS256 keyed with the public key", hsForged, .unsupportedAlgorithm("HS256")),
            ("RS256 header on an EC key", rsOnEC, .algorithmMismatch(header: "RS256", key: .es256)),
            ("ES256 header on an RSA key", esOnRSA, .algorithmMismatch(header: "ES256", key: .rs256)),
            ("unknown kid", rsKeyIDSwapped, .unknownKeyID("rsa-2")),
            ("no kid", try signed(header: #"{"alg":"ES256","typ":"JWT"}"#), .unknownKeyID(nil)),
            ("tampered payload", tamperedPayload, .invalidSignature),
            ("DER instead of raw signature", derSignature, .invalidSignature),
            ("RS256 token with its signature swapped in", parts[0] + "." + parts[1] + "." + rsSigned.split(separator: ".")[2], .invalidSignature),
            ("wrong typ", try signed(header: #"{"alg":"ES256","kid":"ec-1","typ":"at+jwt"}"#), .unexpectedType("at+jwt")),
            ("missing typ", try signed(header: #"{"alg":"ES256","kid":"ec-1"}"#), .unexpectedType(nil)),
            ("typ with another media type's prefix", try signed(header: #"{"alg":"ES256","kid":"ec-1","typ":"text/jwt"}"#), .unexpectedType("text/jwt")),
            ("typ application/ twice", try signed(header: #"{"alg":"ES256","kid":"ec-1","typ":"application/application/jwt"}"#),
             .unexpectedType("application/application/jwt")),
            ("crit header", try signed(header: #"{"alg":"ES256","kid":"ec-1","typ":"JWT","crit":["exp"]}"#), .unsupportedCriticalHeader),
            ("payload not an object", try signed(header: esHeader, payload: "[1]"), .malformed("payload is not a JSON object")),
            ("payload not JSON", try signed(header: esHeader, payload: "hello"), .malformed("payload is not a JSON object")),
            ("two segments", parts[0] + "." + parts[1], .malformed("expected three dot-separated segments")),
            ("four segments", good + ".x", .malformed("expected three dot-separated segments")),
            ("empty header", "." + parts[1] + "." + parts[2], .malformed("empty segment")),
            ("empty payload", parts[0] + ".." + parts[2], .malformed("empty segment")),
            ("padded signature", good + "==", .malformed("segment is not unpadded base64url")),
            ("standard alphabet", good.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/") + (good.contains("-") || good.contains("_") ? "" : "+"), .malformed("segment is not unpadded base64url")),
            ("whitespace", " " + good, .malformed("segment is not unpadded base64url")),
            ("header not JSON", Base64.encodeURL(Array("alg".utf8)) + "." + parts[1] + "." + parts[2], .malformed("header is not a JSON object")),
            ("header without alg", token(header: #"{"kid":"ec-1"}"#, signature: [1]), .malformed("header has no alg string")),
            ("alg not a string", token(header: #"{"alg":1}"#, signature: [1]), .malformed("header has no alg string")),
            ("kid not a string", token(header: #"{"alg":"ES256","kid":1}"#, signature: [1]), .malformed("kid is not a string")),
            ("too long", good + String(repeating: "A", count: 17_000), .malformed("token longer than 16384 bytes")),
            ("empty", "", .malformed("expected three dot-separated segments")),
        ]
        for (name, jwt, expected) in cases {
            #expect(throws: expected, "\(name)") { try Self.verifier.verify(jwt) }
        }
        // RFC 7515 section 4.1.9: media types compare case-insensitively, and `application/` is
        // taken as prepended to a value without a `/` (found by an independent sweep, stop 32).
        for typ in ["jwt", "application/jwt", "Application/JWT"] {
            #expect(throws: Never.self, "\(typ)") { try Self.verifier.verify(try signed(header: #"{"alg":"ES256","kid":"ec-1","typ":"\#(typ)"}"#)) }
        }
        _ = try Self.verifier.verify(good)
        _ = try Self.verifier.verify(try signed(header: #"{"alg":"ES256","kid":"ec-1","typ":"jwt"}"#))
        _ = try Self.verifier.verify(try signed(header: #"{"alg":"ES256","kid":"ec-1"}"#), expectedType: nil)
    }

    @Test("time validity with leeway", arguments: [
        (1_700_000_000.0, 0.0, nil), (1_700_003_599.0, 0.0, nil), (1_700_003_600.0, 0.0, .expired),
        (1_700_003_629.0, 30.0, nil), (1_700_003_630.0, 30.0, .expired),
        (1_699_999_999.0, 0.0, .notYetValid), (1_699_999_970.0, 30.0, nil), (1_699_999_969.0, 30.0, .notYetValid),
    ] as [(Double, Double, JWTValidityError?)])
    func validity(now: Double, leeway: Double, expected: JWTValidityError?) throws {
        let verified = try Self.verifier.verify(try JWTSigner(key: .es256(Self.ecKey), keyID: "ec-1").sign(claims: Self.claims))
        if let expected {
            #expect(throws: expected) { try verified.checkValidity(now: now, leeway: leeway) }
        } else {
            try verified.checkValidity(now: now, leeway: leeway)
        }
    }

    @Test("malformed or missing time claims", arguments: [
        (["sub": "x"], JWTValidityError.malformedTimeClaim("exp")),
        (["exp": "soon"], .malformedTimeClaim("exp")),
        (["exp": 2_000_000_000, "nbf": true], .malformedTimeClaim("nbf")),
        (["exp": 2_000_000_000, "iat": [1]], .malformedTimeClaim("iat")),
    ] as [([String: JSONValue], JWTValidityError)])
    func malformedTimes(claims: [String: JSONValue], expected: JWTValidityError) throws {
        let verified = try Self.verifier.verify(try JWTSigner(key: .es256(Self.ecKey), keyID: "ec-1").sign(claims: claims))
        #expect(throws: expected) { try verified.checkValidity(now: 1_700_000_000, leeway: 0) }
    }

    @Test("JWK rendering and parsing round-trip; JWKS lists every key")
    func jwk() throws {
        let ec = JWSVerificationKey.es256(Self.ecKey.publicKey)
        let rsa = JWSVerificationKey.rs256(Self.rsaKey.publicKey)
        let ecJWK = ec.jwk(keyID: "ec-1")
        #expect(ecJWK["kty"] == "EC" && ecJWK["crv"] == "P-256" && ecJWK["alg"] == "ES256" && ecJWK["use"] == "sig")
        #expect(ecJWK["kid"] == "ec-1")
        #expect(Base64.decodeURL(ecJWK["x"]!.stringValue!)! + Base64.decodeURL(ecJWK["y"]!.stringValue!)!
                == Array(Self.ecKey.publicKey.x963Representation.dropFirst()))
        let rsaJWK = rsa.jwk(keyID: "rsa-1")
        #expect(rsaJWK["kty"] == "RSA" && rsaJWK["alg"] == "RS256" && rsaJWK["e"] == "AQAB")
        #expect(Base64.decodeURL(rsaJWK["n"]!.stringValue!) == Self.rsaKey.publicKey.modulus)
        #expect(try JWSVerificationKey(jwk: ecJWK) == ec)
        #expect(try JWSVerificationKey(jwk: rsaJWK) == rsa)
        let jwks = JWKS.document([("ec-1", ec), ("rsa-1", rsa)])
        #expect(jwks["keys"]?.arrayValue == [ecJWK, rsaJWK])
        #expect(Set(ecJWK.objectValue!.keys) == ["kty", "crv", "x", "y", "kid", "alg", "use"])
    }

    @Test("unsupported or invalid JWKs are rejected")
    func invalidJWK() throws {
        let ecJWK = JWSVerificationKey.es256(Self.ecKey.publicKey).jwk(keyID: "k").objectValue!
        func with(_ changes: [String: JSONValue?]) -> JSONValue {
            var members = ecJWK
            for (name, value) in changes { members[name] = value }
            return .object(members)
        }
        let cases: [(String, JSONValue)] = [
            ("not an object", "EC"),
            ("private key", with(["d": "AAAA"])),
            ("P-384", with(["crv": "P-384"])),
            ("oct", with(["kty": "oct"])),
            ("missing kty", with(["kty": nil])),
            ("short x", with(["x": "AAAA"])),
            ("padded x", with(["x": .string(ecJWK["x"]!.stringValue! + "=")])),
            ("point off the curve", with(["y": .string(ecJWK["x"]!.stringValue!)])),
            ("alg mismatch", with(["alg": "RS256"])),
            ("short RSA", ["kty": "RSA", "n": .string(Base64.encodeURL([UInt8](repeating: 0xC1, count: 128))), "e": "AQAB"]),
            ("RSA without e", ["kty": "RSA", "n": .string(Base64.encodeURL(Self.rsaKey.publicKey.modulus))]),
        ]
        for (name, jwk) in cases {
            #expect(throws: JOSEError.self, "\(name)") { try JWSVerificationKey(jwk: jwk) }
        }
    }
}
