import AGCrypto
import Testing

private let badPoints: [(String, [UInt8])] = [
    ("empty", []),
    ("short", [0x04] + [UInt8](repeating: 1, count: 63)),
    ("long", [0x04] + [UInt8](repeating: 1, count: 65)),
    ("compressed prefix", [0x03] + [UInt8](repeating: 1, count: 64)),
    ("off the curve", [0x04] + [UInt8](repeating: 1, count: 64)),
    ("point at infinity", [UInt8](repeating: 0, count: 65)),
]

private let badDERSignatures: [(String, [UInt8])] = [
    ("empty", []),
    ("not a sequence", [0x02, 0x01, 0x01]),
    ("trailing byte", [0x30, 0x06, 0x02, 0x01, 0x01, 0x02, 0x01, 0x01, 0x00]),
    ("r wider than 32 bytes", [0x30, 0x26, 0x02, 0x21, 0x01] + [UInt8](repeating: 1, count: 32) + [0x02, 0x01, 0x01]),
]

private let garbageSignatures: [[UInt8]] = [
    [], [0x30], [0x30, 0x00], [UInt8](repeating: 0, count: 64), [UInt8](repeating: 0xFF, count: 72),
]
@Suite("P-256 keys and ES256 signatures")
struct P256Tests {
    static let message = Array("refresh nonce".utf8)

    @Test("a generated key signs and verifies in DER and raw form")
    func signVerify() throws {
        let key = try P256.PrivateKey()
        let der = try key.signature(for: Self.message)
        let raw = try key.rawSignature(for: Self.message)
        #expect(raw.count == 64)
        #expect(key.publicKey.isValidSignature(derSignature: der, for: Self.message))
        #expect(key.publicKey.isValidSignature(rawSignature: raw, for: Self.message))
        #expect(key.publicKey.isValidSignature(rawSignature: try P256.rawSignature(fromDER: der), for: Self.message))
    }

    @Test("every single-bit flip of a signature or message is rejected")
    func flippedBits() throws {
        let key = try P256.PrivateKey()
        let der = try key.signature(for: Self.message)
        let raw = try key.rawSignature(for: Self.message)
        for bit in 0..<(der.count * 8) {
            #expect(!key.publicKey.isValidSignature(derSignature: flippingBit(bit, of: der), for: Self.message))
        }
        for bit in 0..<(raw.count * 8) {
            #expect(!key.publicKey.isValidSignature(rawSignature: flippingBit(bit, of: raw), for: Self.message))
        }
        for bit in 0..<(Self.message.count * 8) {
            #expect(!key.publicKey.isValidSignature(derSignature: der, for: flippingBit(bit, of: Self.message)))
        }
    }

    @Test("a signature does not verify under another key")
    func wrongKey() throws {
        let signer = try P256.PrivateKey()
        let other = try P256.PrivateKey()
        let der = try signer.signature(for: Self.message)
        #expect(!other.publicKey.isValidSignature(derSignature: der, for: Self.message))
        #expect(!other.publicKey.isValidSignature(rawSignature: try P256.rawSignature(fromDER: der), for: Self.message))
    }

    @Test("malformed signatures are invalid, not errors", arguments: garbageSignatures)
    func malformedSignatures(signature: [UInt8]) throws {
        let key = try P256.PrivateKey()
        #expect(!key.publicKey.isValidSignature(derSignature: signature, for: Self.message))
        #expect(!key.publicKey.isValidSignature(rawSignature: signature, for: Self.message))
    }

    @Test("the message is hashed by the scheme, not taken as a prehash")
    func notPrehash() throws {
        let key = try P256.PrivateKey()
        let digest = SHA256.hash(Self.message)
        let der = try key.signature(for: Self.message)
        #expect(!key.publicKey.isValidSignature(derSignature: der, for: digest))
    }

    @Test("SEC1 PEM, PKCS#8 export and public encodings agree with the openssl CLI")
    func pemRoundTrip() throws {
        let key = try P256.PrivateKey(pemRepresentation: TestKeys.p256SEC1)
        let expectedDER = hex(TestKeys.p256PublicDERHex)
        #expect(key.publicKey.derRepresentation == expectedDER)
        #expect(key.publicKey.x963Representation == Array(expectedDER.suffix(65)))
        #expect(key.publicKey.pemRepresentation == TestKeys.p256PublicPEM + "\n")

        let pkcs8 = try key.pemRepresentation()
        #expect(pkcs8.hasPrefix("-----BEGIN PRIVATE KEY-----\n"))
        let reparsed = try P256.PrivateKey(pemRepresentation: pkcs8)
        #expect(reparsed.publicKey == key.publicKey)

        let fromPEM = try P256.PublicKey(pemRepresentation: TestKeys.p256PublicPEM)
        let fromDER = try P256.PublicKey(derRepresentation: expectedDER)
        let fromX963 = try P256.PublicKey(x963Representation: key.publicKey.x963Representation)
        #expect(fromPEM == key.publicKey && fromDER == key.publicKey && fromX963 == key.publicKey)

        let signature = try reparsed.signature(for: Self.message)
        #expect(fromX963.isValidSignature(derSignature: signature, for: Self.message))
    }

    @Test("public keys that are not P-256 uncompressed points are rejected", arguments: badPoints)
    func invalidX963(name: String, point: [UInt8]) {
        #expect(throws: CryptoError.self, "\(name)") { try P256.PublicKey(x963Representation: point) }
    }

    @Test("wrong key types and malformed encodings are rejected")
    func invalidEncodings() {
        let der = hex(TestKeys.p256PublicDERHex)
        #expect(throws: CryptoError.self) { try P256.PublicKey(pemRepresentation: TestKeys.p384PublicPEM) }
        #expect(throws: CryptoError.self) { try P256.PublicKey(pemRepresentation: TestKeys.rsa1024PublicPEM) }
        #expect(throws: CryptoError.self) { try P256.PublicKey(pemRepresentation: "") }
        #expect(throws: CryptoError.self) { try P256.PublicKey(pemRepresentation: TestKeys.p256SEC1) }
        #expect(throws: CryptoError.self) { try P256.PublicKey(derRepresentation: der + [0]) }
        #expect(throws: CryptoError.self) { try P256.PublicKey(derRepresentation: Array(der.dropLast())) }
        #expect(throws: CryptoError.self) { try P256.PublicKey(derRepresentation: []) }
        #expect(throws: CryptoError.self) { try P256.PrivateKey(pemRepresentation: TestKeys.rsa2048PKCS1) }
        #expect(throws: CryptoError.self) { try P256.PrivateKey(pemRepresentation: TestKeys.p256PublicPEM) }
        #expect(throws: CryptoError.self) { try P256.PrivateKey(pemRepresentation: TestKeys.p256EncryptedPKCS8) }
        #expect(throws: CryptoError.self) { try P256.PrivateKey(pemRepresentation: "garbage") }
    }

    @Test("errors carry OpenSSL's code and text")
    func errorDetails() {
        do {
            _ = try P256.PublicKey(derRepresentation: [0x30, 0x03, 0x02, 0x01])
            Issue.record("accepted a truncated key")
        } catch {
            #expect(error.operation == "P256.PublicKey(derRepresentation:)")
            #expect(error.code != 0)
            #expect(!error.reason.isEmpty)
        }
    }

    @Test("DER and raw signature forms convert both ways with fixed 32-byte padding")
    func signatureConversion() throws {
        // r has its top bit set (DER adds a 0x00), s is small (raw pads it to 32 bytes).
        let r = [UInt8](repeating: 0xF0, count: 32)
        let s = [UInt8](repeating: 0, count: 31) + [0x05]
        let der = try P256.derSignature(fromRaw: r + s)
        #expect(der == [0x30, 0x26, 0x02, 0x21, 0x00] + r + [0x02, 0x01, 0x05])
        #expect(try P256.rawSignature(fromDER: der) == r + s)
    }

    @Test("malformed signature conversions throw", arguments: badDERSignatures)
    func malformedDER(name: String, der: [UInt8]) {
        #expect(throws: CryptoError.self, "\(name)") { try P256.rawSignature(fromDER: der) }
    }

    @Test("raw signatures must be exactly 64 bytes", arguments: [0, 63, 65, 72])
    func rawLength(count: Int) {
        #expect(throws: CryptoError.self) { try P256.derSignature(fromRaw: [UInt8](repeating: 1, count: count)) }
    }

    @Test("one key verifies concurrently from many tasks")
    func concurrentVerify() async throws {
        let key = try P256.PrivateKey()
        let publicKey = key.publicKey
        let signature = try key.signature(for: Self.message)
        let results = await withTaskGroup(of: Bool.self) { group in
            for index in 0..<64 {
                group.addTask {
                    publicKey.isValidSignature(derSignature: signature, for: Self.message)
                        && !publicKey.isValidSignature(derSignature: signature, for: Self.message + [UInt8(index)])
                }
            }
            return await group.reduce(into: [Bool]()) { $0.append($1) }
        }
        #expect(results.count == 64 && results.allSatisfy { $0 })
    }
}
