import AGCrypto
import Testing

@Suite("SHA-256, HMAC, constant-time comparison, randomness")
struct DigestTests {
    @Test("SHA-256 known answers (FIPS 180-4 examples)", arguments: [
        ("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
        ("abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
        ("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"),
    ])
    func sha256KnownAnswers(input: String, expected: String) {
        #expect(SHA256.hash(input.utf8) == hex(expected))
        #expect(SHA256.hash(Array(input.utf8)) == hex(expected))
        // A non-contiguous sequence takes the copying path and must agree.
        #expect(SHA256.hash(input.utf8.lazy.map { $0 }) == hex(expected))
    }

    @Test("SHA-256 of a concatenation equals the two-argument form")
    func sha256Concatenation() {
        let first = Array("authenticator".utf8)
        let second = Array("data".utf8)
        #expect(SHA256.hash(first, second) == SHA256.hash(first + second))
        #expect(SHA256.hash([], []) == SHA256.hash([UInt8]()))
        // Both parts are hashed, in order (FIPS 180-4 "abc").
        #expect(SHA256.hash(Array("ab".utf8), Array("c".utf8)) == hex("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"))
        #expect(SHA256.hash([], Array("abc".utf8)) == SHA256.hash(Array("abc".utf8), []))
    }

    @Test("HMAC-SHA-256 known answers (RFC 4231 cases 1, 2, 6)", arguments: [
        ([UInt8](repeating: 0x0b, count: 20), Array("Hi There".utf8),
         "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"),
        (Array("Jefe".utf8), Array("what do ya want for nothing?".utf8),
         "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"),
        ([UInt8](repeating: 0xaa, count: 131), Array("Test Using Larger Than Block-Size Key - Hash Key First".utf8),
         "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"),
    ])
    func hmacKnownAnswers(key: [UInt8], data: [UInt8], expected: String) {
        #expect(HMACSHA256.authenticate(key: key, data: data) == hex(expected))
        #expect(HMACSHA256.isValidAuthenticationCode(hex(expected), key: key, data: data))
        #expect(!HMACSHA256.isValidAuthenticationCode(flippingBit(0, of: hex(expected)), key: key, data: data))
        #expect(!HMACSHA256.isValidAuthenticationCode(Array(hex(expected).dropLast()), key: key, data: data))
    }

    @Test("HMAC with an empty key and empty data")
    func hmacEmpty() {
        #expect(HMACSHA256.authenticate(key: [UInt8](), data: [UInt8]())
                == hex("b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad"))
    }

    @Test("constant-time comparison", arguments: [
        ([UInt8](), [UInt8](), true),
        ([1, 2, 3], [1, 2, 3], true),
        ([1, 2, 3], [1, 2, 4], false),
        ([1, 2, 3], [1, 2], false),
        ([], [0], false),
        ([0x80], [0x00], false),
    ] as [([UInt8], [UInt8], Bool)])
    func constantTime(a: [UInt8], b: [UInt8], equal: Bool) {
        #expect(constantTimeEquals(a, b) == equal)
        #expect(constantTimeEquals(b, a) == equal)
    }

    @Test("secure random bytes have the requested length and differ between calls")
    func randomBytes() {
        #expect(SecureRandom.bytes(count: 0).isEmpty)
        #expect(SecureRandom.bytes(count: 1).count == 1)
        let first = SecureRandom.bytes(count: 32)
        let second = SecureRandom.bytes(count: 32)
        #expect(first.count == 32)
        #expect(first != second)
    }
}
