import AGCrypto
import AGFormats
import AGJOSE
import Testing

private func b64url(_ text: String) -> [UInt8] { Base64.decodeURL(text)! }

@Suite("Concat KDF and P-256 JWK")
struct ConcatKDFAndJWKTests {
    /// RFC 7518 appendix C: ECDH-ES direct agreement for A128GCM between Alice's ephemeral key and Bob's key.
    @Test("RFC 7518 appendix C derives its published content key")
    func rfc7518AppendixC() throws {
        let bob = try P256.PrivateKey(rawRepresentation: b64url("VEmDZpDXXK8p8N0Cndsxs924q6nS1RXFASRl6BfUqdw"))
        #expect(bob.publicKey.jwk == ["kty": "EC", "crv": "P-256", "x": "weNJy2HscCSM6AEDTDg04biOvhFhyyWvOHQfeF_PxMQ",
                                      "y": "e8lnCO-AlStT-NJVX-crhB7QRYhiix03illJOVAOyck"])
        let alice = try P256.PublicKey(jwk: ["kty": "EC", "crv": "P-256",
                                             "x": "gI0GAILBdu7T53akrFmMyGcsF3n5dO7MmwNBHKW5SV0",
                                             "y": "SLW_xSffzlPWrHEVI30DHM_4egVwt3NQqeUD7nMFpps"])
        let z = try bob.sharedSecretFromKeyAgreement(with: alice)
        #expect(z == [158, 86, 217, 29, 129, 113, 53, 211, 114, 131, 66, 131, 191, 132, 38, 156, 251, 49, 110, 163,
                      218, 128, 106, 72, 246, 218, 167, 121, 140, 254, 144, 196])
        let info = ConcatKDF.otherInfo(algorithmID: "A128GCM", partyUInfo: Array("Alice".utf8),
                                       partyVInfo: Array("Bob".utf8), keyBitLength: 128)
        #expect(info == [0, 0, 0, 7, 65, 49, 50, 56, 71, 67, 77, 0, 0, 0, 5, 65, 108, 105, 99, 101, 0, 0, 0, 3, 66, 111,
                         98, 0, 0, 0, 128])
        let key = ConcatKDF.deriveKey(sharedSecret: z, algorithmID: "A128GCM", partyUInfo: Array("Alice".utf8),
                                      partyVInfo: Array("Bob".utf8), keyBitLength: 128)
        #expect(Base64.encodeURL(key) == "VqqN6vgjbSBcIijNcacQGg")
    }

    @Test("one round per 256 bits: K(1) || K(2) prefixes, counters big-endian from 1")
    func rounds() {
        let z = [UInt8](repeating: 7, count: 32), info: [UInt8] = [1, 2, 3]
        let k1 = SHA256.hash([0, 0, 0, 1] + z + info), k2 = SHA256.hash([0, 0, 0, 2] + z + info)
        #expect(ConcatKDF.deriveKey(sharedSecret: z, otherInfo: info, byteCount: 32) == k1)
        #expect(ConcatKDF.deriveKey(sharedSecret: z, otherInfo: info, byteCount: 16) == Array(k1.prefix(16)))
        #expect(ConcatKDF.deriveKey(sharedSecret: z, otherInfo: info, byteCount: 48) == k1 + Array(k2.prefix(16)))
        #expect(ConcatKDF.deriveKey(sharedSecret: z, otherInfo: info, byteCount: 0) == [])
    }

    @Test("empty party infos are zero lengths, and SuppPubInfo is the bit length")
    func emptyPartyInfo() {
        #expect(ConcatKDF.otherInfo(algorithmID: "A256GCM", partyUInfo: [], partyVInfo: [], keyBitLength: 256)
                == [0, 0, 0, 7] + Array("A256GCM".utf8) + [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0])
    }

    @Test("a P-256 JWK has exactly kty, crv, x, y with 32-byte coordinates and round-trips")
    func jwkRoundTrip() throws {
        let key = try P256.PrivateKey().publicKey
        let jwk = key.jwk
        #expect(Set(jwk.objectValue!.keys) == ["kty", "crv", "x", "y"])
        #expect(b64url(jwk["x"]!.stringValue!) == key.x && b64url(jwk["y"]!.stringValue!) == key.y)
        #expect(try P256.PublicKey(jwk: jwk) == key)
        var withExtras = jwk.objectValue!
        withExtras["kid"] = "k"
        withExtras["use"] = "enc"
        #expect(try P256.PublicKey(jwk: .object(withExtras)) == key)
    }

    @Test("malformed P-256 JWKs are refused with a reason")
    func invalidJWK() throws {
        let key = try P256.PrivateKey().publicKey
        let good = key.jwk.objectValue!
        func with(_ changes: [String: JSONValue?]) -> JSONValue {
            var members = good
            for (name, value) in changes { members[name] = value }
            return .object(members)
        }
        let cases: [(String, JSONValue, String)] = [
            ("not an object", "EC", "a JWK must be a JSON object"),
            ("private member", with(["d": "AAAA"]), "a private JWK was given where a public key is expected"),
            ("RSA", with(["kty": "RSA"]), "kty must be EC"),
            ("kty missing", with(["kty": nil]), "kty must be EC"),
            ("P-384", with(["crv": "P-384"]), "crv must be P-256"),
            ("crv missing", with(["crv": nil]), "crv must be P-256"),
            ("x 31 bytes", with(["x": .string(Base64.encodeURL(key.x.dropFirst()))]), "x must be exactly 32 bytes, not 31"),
            ("x 33 bytes", with(["x": .string(Base64.encodeURL([0] + key.x))]), "x must be exactly 32 bytes, not 33"),
            ("y 31 bytes", with(["y": .string(Base64.encodeURL(key.y.dropLast()))]), "y must be exactly 32 bytes, not 31"),
            ("x padded", with(["x": .string(Base64.encodeURL(key.x) + "=")]), "x must be an unpadded base64url string"),
            ("x standard alphabet", with(["x": .string(Base64.encode(key.x))]), "x must be an unpadded base64url string"),
            ("x a number", with(["x": 1]), "x must be an unpadded base64url string"),
            ("y missing", with(["y": nil]), "y must be an unpadded base64url string"),
            ("off the curve", with(["y": .string(Base64.encodeURL(key.x))]), "the point is not on P-256"),
        ]
        for (name, jwk, reason) in cases {
            #expect(throws: JOSEError.invalidKey(reason), "\(name)") { try P256.PublicKey(jwk: jwk) }
        }
    }
}
