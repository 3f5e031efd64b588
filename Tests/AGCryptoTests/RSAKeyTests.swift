import AGCrypto
import Testing

@Suite("RSA keys and RS256 signatures")
struct RSAKeyTests {
    static let message = Array("header.payload".utf8)

    @Test("PKCS#1 PEM parses; signatures verify; tampering and wrong keys fail")
    func signVerify() throws {
        let key = try RSAKey.PrivateKey(pemRepresentation: TestKeys.rsa2048PKCS1)
        let signature = try key.signature(for: Self.message)
        #expect(signature.count == 256)
        #expect(key.publicKey.isValidSignature(signature, for: Self.message))
        #expect(!key.publicKey.isValidSignature(flippingBit(2000, of: signature), for: Self.message))
        #expect(!key.publicKey.isValidSignature(signature, for: flippingBit(3, of: Self.message)))
        #expect(!key.publicKey.isValidSignature([], for: Self.message))
        #expect(!key.publicKey.isValidSignature(Array(signature.dropLast()), for: Self.message))
        let other = try RSAKey.PrivateKey(bits: 2048)
        #expect(!other.publicKey.isValidSignature(signature, for: Self.message))
        #expect(other.publicKey.isValidSignature(try other.signature(for: Self.message), for: Self.message))
    }

    @Test("PKCS#8 and public PEM round trip; JWK components are exposed")
    func roundTrip() throws {
        let key = try RSAKey.PrivateKey(pemRepresentation: TestKeys.rsa2048PKCS1)
        let pkcs8 = try key.pemRepresentation()
        #expect(pkcs8.hasPrefix("-----BEGIN PRIVATE KEY-----"))
        #expect(try RSAKey.PrivateKey(pemRepresentation: pkcs8).publicKey == key.publicKey)
        let publicPEM = try key.publicKey.pemRepresentation()
        #expect(try RSAKey.PublicKey(pemRepresentation: publicPEM) == key.publicKey)
        #expect(try RSAKey.PublicKey(derRepresentation: key.publicKey.derRepresentation()) == key.publicKey)
        #expect(SHA256.hash(try key.publicKey.derRepresentation())
                == hex("7bfaf4ce34d3ad6bc6bbb9fac1c230a2b2a14d5e29594809f011191379b811ea"))
        #expect(key.publicKey.modulus.count == 256)
        #expect(key.publicKey.modulus.first.map { $0 >= 0x80 } == true)
        #expect(key.publicKey.publicExponent == [0x01, 0x00, 0x01])
    }

    @Test("short keys, EC keys and unsupported sizes are rejected")
    func rejections() {
        #expect(throws: CryptoError.self) { try RSAKey.PublicKey(pemRepresentation: TestKeys.rsa1024PublicPEM) }
        #expect(throws: CryptoError.self) { try RSAKey.PublicKey(pemRepresentation: TestKeys.p256PublicPEM) }
        #expect(throws: CryptoError.self) { try RSAKey.PrivateKey(pemRepresentation: TestKeys.p256SEC1) }
        #expect(throws: CryptoError.self) { try RSAKey.PrivateKey(bits: 1024) }
        #expect(throws: CryptoError.self) { try RSAKey.PublicKey(derRepresentation: [0x30, 0x00]) }
    }
}
