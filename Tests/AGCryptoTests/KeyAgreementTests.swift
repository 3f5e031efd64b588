import AGCrypto
import Testing

/// NIST CAVS ECDH P-256 (SP 800-56A, KAS ECC CDH primitive), first vector.
private enum CAVS {
    static let peerX = hex("700c48f77f56584c5cc632ca65640db91b6bacce3a4df6b42ce7cc838833d287")
    static let peerY = hex("db71e509e3fd9b060ddb20ba5c51dcc5948d46fbf640dfe0441782cab85fa4ac")
    static let d = hex("7d7dc5f71eb29ddaf80d6214632eeae03d9058af1fb6d22ed80badb62bc1a534")
    static let x = hex("ead218590119e8876b29146ff89ca61770c4edbbf97d38ce385ed281d8a6b230")
    static let y = hex("28af61281fd35e2fa7002523acc85a429cb06ee6648325389f59edfce1405141")
    static let z = hex("46fc62106420ff012e54a434fbdd2d25ccc5852060561e68040dd7778997bd7b")
}

@Suite("P-256 key agreement, raw keys and coordinates")
struct KeyAgreementTests {
    @Test("the NIST CAVS vector: d·G and Z reproduce")
    func cavs() throws {
        let key = try P256.PrivateKey(rawRepresentation: CAVS.d)
        #expect(key.publicKey.x == CAVS.x && key.publicKey.y == CAVS.y)
        let peer = try P256.PublicKey(x: CAVS.peerX, y: CAVS.peerY)
        #expect(try key.sharedSecretFromKeyAgreement(with: peer) == CAVS.z)
    }

    @Test("both sides derive the same 32-byte secret; a third key derives another")
    func agreement() throws {
        let alice = try P256.PrivateKey(), bob = try P256.PrivateKey(), eve = try P256.PrivateKey()
        let ab = try alice.sharedSecretFromKeyAgreement(with: bob.publicKey)
        #expect(ab.count == 32)
        #expect(ab == (try bob.sharedSecretFromKeyAgreement(with: alice.publicKey)))
        #expect(ab != (try eve.sharedSecretFromKeyAgreement(with: bob.publicKey)))
    }

    @Test("a raw private key signs like its PEM twin and agrees on the public point")
    func rawPrivateKey() throws {
        let key = try P256.PrivateKey(pemRepresentation: TestKeys.p256SEC1)
        let d = hex("c6825fe63681d3801a0b2e479f12e933da79168ab16cbe5236a8f9b65cc30dc2")
        let raw = try P256.PrivateKey(rawRepresentation: d)
        #expect(raw.publicKey == key.publicKey)
        let message = Array("raw".utf8)
        #expect(key.publicKey.isValidSignature(rawSignature: try raw.rawSignature(for: message), for: message))
    }

    @Test("private scalars outside 1..<n or of the wrong length are refused", arguments: [
        ("zero", [UInt8](repeating: 0, count: 32)),
        ("n", hex("ffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551")),
        ("above n", [UInt8](repeating: 0xFF, count: 32)),
        ("31 bytes", [UInt8](repeating: 1, count: 31)),
        ("33 bytes", [UInt8](repeating: 1, count: 33)),
    ])
    func badScalars(name: String, d: [UInt8]) {
        #expect(throws: CryptoError.self, "\(name)") { try P256.PrivateKey(rawRepresentation: d) }
    }

    @Test("n − 1 is the largest scalar accepted")
    func largestScalar() throws {
        let key = try P256.PrivateKey(rawRepresentation: hex("ffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632550"))
        // (n − 1)·G = −G: same x as the generator, y negated.
        #expect(key.publicKey.x == hex("6b17d1f2e12c4247f8bce6e563a440f277037d812deb33a0f4a13945d898c296"))
    }

    @Test("coordinates are always 32 bytes and rebuild the key; wrong lengths and off-curve points are refused")
    func coordinates() throws {
        let key = try P256.PrivateKey().publicKey
        #expect(key.x.count == 32 && key.y.count == 32)
        #expect(try P256.PublicKey(x: key.x, y: key.y) == key)
        #expect(throws: CryptoError.self) { try P256.PublicKey(x: Array(key.x.dropFirst()), y: key.y) }
        #expect(throws: CryptoError.self) { try P256.PublicKey(x: [0] + key.x, y: key.y) }
        #expect(throws: CryptoError.self) { try P256.PublicKey(x: key.x, y: Array(key.y.dropLast())) }
        var y = key.y
        y[31] ^= 1
        #expect(throws: CryptoError.self) { try P256.PublicKey(x: key.x, y: y) }
    }

    @Test("keys whose coordinates start with a zero byte keep 32-byte coordinates and still agree")
    func shortCoordinates() throws {
        var found = (x: false, y: false)
        var attempts = 0
        while !(found.x && found.y), attempts < 5_000 {
            attempts += 1
            let key = try P256.PrivateKey()
            let shortX = key.publicKey.x[0] == 0, shortY = key.publicKey.y[0] == 0
            guard shortX || shortY else { continue }
            found.x = found.x || shortX
            found.y = found.y || shortY
            #expect(key.publicKey.x963Representation.count == 65)
            let rebuilt = try P256.PublicKey(x: key.publicKey.x, y: key.publicKey.y)
            #expect(rebuilt == key.publicKey)
            let peer = try P256.PrivateKey()
            #expect(try peer.sharedSecretFromKeyAgreement(with: rebuilt)
                    == (try key.sharedSecretFromKeyAgreement(with: peer.publicKey)))
        }
        #expect(found.x && found.y, "no short coordinate in \(attempts) keys")
    }
}

@Suite("Low-S ECDSA signatures")
struct LowSTests {
    static let halfOrder = hex("7fffffff800000007fffffffffffffffde737d56d38bcf4279dce5617e3192a8")
    static let order = hex("ffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551")
    static let r = [UInt8](repeating: 0x11, count: 32)

    @Test("the boundary is n/2", arguments: [
        ("s = 1", [UInt8](repeating: 0, count: 31) + [1], true),
        ("s = n/2", hex("7fffffff800000007fffffffffffffffde737d56d38bcf4279dce5617e3192a8"), true),
        ("s = n/2 + 1", hex("7fffffff800000007fffffffffffffffde737d56d38bcf4279dce5617e3192a9"), false),
        ("s = n − 1", hex("ffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632550"), false),
        ("first byte above", hex("80") + [UInt8](repeating: 0, count: 31), false),
    ])
    func boundary(name: String, s: [UInt8], low: Bool) {
        #expect(P256.isLowS(rawSignature: Self.r + s) == low, "\(name)")
    }

    @Test("anything but 64 bytes is not low-S and is left alone", arguments: [0, 63, 65, 72])
    func wrongLength(count: Int) {
        let bytes = [UInt8](repeating: 0, count: count)
        #expect(!P256.isLowS(rawSignature: bytes))
        #expect(P256.lowSNormalized(rawSignature: bytes) == bytes)
    }

    @Test("normalising maps s to n − s, keeps r and validity, and is idempotent")
    func normalise() throws {
        let key = try P256.PrivateKey()
        let message = Array("one spelling".utf8)
        // Flip a low-S signature to its high-S twin by hand, then normalise it back.
        let low = try key.rawSignature(for: message)
        let high = Array(low[0..<32]) + subtract(Self.order, Array(low[32...]))
        #expect(!P256.isLowS(rawSignature: high))
        #expect(key.publicKey.isValidSignature(rawSignature: high, for: message), "ECDSA accepts both spellings")
        #expect(P256.lowSNormalized(rawSignature: high) == low)
        #expect(P256.lowSNormalized(rawSignature: low) == low)
        #expect(P256.lowSNormalized(rawSignature: Self.r + Self.halfOrder) == Self.r + Self.halfOrder)
    }

    @Test("our own raw signatures are always low-S")
    func signerEmitsLowS() throws {
        let key = try P256.PrivateKey()
        for index in 0..<200 {
            let message = Array("message \(index)".utf8)
            let signature = try key.rawSignature(for: message)
            #expect(P256.isLowS(rawSignature: signature))
            #expect(key.publicKey.isValidSignature(rawSignature: signature, for: message))
        }
    }

    /// `a − b` for 32-byte big-endian numbers with `a >= b`: an independent check of the module's arithmetic.
    private func subtract(_ a: [UInt8], _ b: [UInt8]) -> [UInt8] {
        var result = [UInt8](repeating: 0, count: 32)
        var borrow = 0
        for index in (0..<32).reversed() {
            var value = Int(a[index]) - Int(b[index]) - borrow
            borrow = value < 0 ? 1 : 0
            if value < 0 { value += 256 }
            result[index] = UInt8(value)
        }
        return result
    }
}
