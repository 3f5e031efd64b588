import AGCrypto
import AGFormats
import AGJOSE
import Testing

@Suite("JWS ES256 raw r‖s signatures")
struct JWSRawSignatureTests {
    static let key = try! P256.PrivateKey()

    static func parts() throws -> [String] {
        try JWTSigner(key: .es256(key), keyID: "k").sign(claims: ["sub": "x"]).split(separator: ".").map(String.init)
    }

    @Test("only exactly 64 bytes of r‖s verify; DER, short, long and zero signatures are invalid")
    func shapes() throws {
        let parts = try Self.parts()
        let raw = Base64.decodeURL(parts[2])!
        let der = try P256.derSignature(fromRaw: raw)
        let r = Array(raw[0..<32]), s = Array(raw[32...])
        let cases: [(String, [UInt8])] = [
            ("DER", der),
            ("63 bytes", Array(raw.dropLast())),
            ("65 bytes", raw + [0]),
            ("65 bytes, zero first", [0] + raw),
            ("r only", r),
            ("s‖r", s + r),
            ("zero", [UInt8](repeating: 0, count: 64)),
            ("r = n", P256Order.bytes + s),
            ("DER padded to 64", Array((der + [UInt8](repeating: 0, count: 64)).prefix(64))),
        ]
        let key = JWSVerificationKey.es256(Self.key.publicKey)
        for (name, signature) in cases {
            let token = parts[0] + "." + parts[1] + "." + Base64.encodeURL(signature)
            #expect(throws: JOSEError.invalidSignature, "\(name)") { try JWSCompact(parsing: token).verify(with: key) }
        }
        try JWSCompact(parsing: parts.joined(separator: ".")).verify(with: key)
    }

    @Test("tokens we sign are low-S; the generic verifier still accepts a high-S twin")
    func lowS() throws {
        let key = JWSVerificationKey.es256(Self.key.publicKey)
        for index in 0..<64 {
            let token = try JWTSigner(key: .es256(Self.key), keyID: "k").sign(claims: ["n": .integer(Int64(index))])
            let parts = token.split(separator: ".").map(String.init)
            let raw = Base64.decodeURL(parts[2])!
            #expect(P256.isLowS(rawSignature: raw))
            let high = P256.negatingS(rawSignature: raw)
            #expect(!P256.isLowS(rawSignature: high))
            try JWSCompact(parsing: parts[0] + "." + parts[1] + "." + Base64.encodeURL(high)).verify(with: key)
            // A verifier for the gateway's own keys takes the low-S spelling only.
            var own = JWTVerifier(keys: ["k": key])
            own.requiresLowS = true
            _ = try own.verify(token)
            #expect(throws: JOSEError.invalidSignature) { try own.verify(parts[0] + "." + parts[1] + "." + Base64.encodeURL(high)) }
        }
    }
}

/// The P-256 group order, for building signatures the signer never makes.
enum P256Order {
    static let bytes: [UInt8] = [
        0xFF, 0xFF, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x00, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
        0xBC, 0xE6, 0xFA, 0xAD, 0xA7, 0x17, 0x9E, 0x84, 0xF3, 0xB9, 0xCA, 0xC2, 0xFC, 0x63, 0x25, 0x51,
    ]
}
