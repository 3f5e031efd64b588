import AGCrypto
import Testing

/// The GCM specification's test case 16 (AES-256, 96-bit IV, 20 bytes of associated data).
private enum GCMCase16 {
    static let key = hex("feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308")
    static let iv = hex("cafebabefacedbaddecaf888")
    static let aad = hex("feedfacedeadbeeffeedfacedeadbeefabaddad2")
    static let plaintext = hex("d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a72"
                               + "1c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b39")
    static let ciphertext = hex("522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa"
                                + "8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7a0abcc9f662")
    static let tag = hex("76fc6ece0f4e1768cddf8853bb2d551b")
}

@Suite("AES-256-GCM")
struct AES256GCMTests {
    @Test("the published test case seals and opens exactly")
    func knownAnswer() throws {
        let box = try AES256GCM.seal(GCMCase16.plaintext, key: GCMCase16.key, iv: GCMCase16.iv, authenticating: GCMCase16.aad)
        #expect(box.ciphertext == GCMCase16.ciphertext)
        #expect(box.tag == GCMCase16.tag)
        #expect(try AES256GCM.open(box, key: GCMCase16.key, iv: GCMCase16.iv, authenticating: GCMCase16.aad) == GCMCase16.plaintext)
    }

    @Test("empty plaintext and empty associated data still carry a tag", arguments: [0, 1, 15, 16, 17, 1000])
    func lengths(count: Int) throws {
        let key = SecureRandom.bytes(count: 32), iv = SecureRandom.bytes(count: 12)
        let plaintext = SecureRandom.bytes(count: count)
        let box = try AES256GCM.seal(plaintext, key: key, iv: iv, authenticating: [])
        #expect(box.ciphertext.count == count && box.tag.count == 16)
        #expect(try AES256GCM.open(box, key: key, iv: iv, authenticating: []) == plaintext)
    }

    @Test("any change to key, IV, tag, ciphertext or associated data is refused")
    func tampering() throws {
        let box = AES256GCM.SealedBox(ciphertext: GCMCase16.ciphertext, tag: GCMCase16.tag)
        func opens(_ box: AES256GCM.SealedBox, key: [UInt8] = GCMCase16.key, iv: [UInt8] = GCMCase16.iv,
                   aad: [UInt8] = GCMCase16.aad) -> Bool {
            (try? AES256GCM.open(box, key: key, iv: iv, authenticating: aad)) != nil
        }
        #expect(opens(box))
        for bit in stride(from: 0, to: 128, by: 7) {
            #expect(!opens(AES256GCM.SealedBox(ciphertext: box.ciphertext, tag: flippingBit(bit, of: box.tag))))
        }
        for bit in stride(from: 0, to: box.ciphertext.count * 8, by: 13) {
            #expect(!opens(AES256GCM.SealedBox(ciphertext: flippingBit(bit, of: box.ciphertext), tag: box.tag)))
        }
        #expect(!opens(box, key: flippingBit(0, of: GCMCase16.key)))
        #expect(!opens(box, iv: flippingBit(95, of: GCMCase16.iv)))
        #expect(!opens(box, aad: flippingBit(3, of: GCMCase16.aad)))
        #expect(!opens(box, aad: []))
        #expect(!opens(box, aad: GCMCase16.aad + [0]))
        #expect(!opens(AES256GCM.SealedBox(ciphertext: Array(box.ciphertext.dropLast()), tag: box.tag)))
        #expect(!opens(AES256GCM.SealedBox(ciphertext: box.ciphertext, tag: Array(box.tag.prefix(12)))))
    }

    @Test("a failed open says why and leaves no OpenSSL error behind")
    func failureReason() throws {
        let box = AES256GCM.SealedBox(ciphertext: GCMCase16.ciphertext, tag: [UInt8](repeating: 0, count: 16))
        #expect(throws: CryptoError(operation: "AES256GCM.open", code: 0, reason: "authentication failed")) {
            try AES256GCM.open(box, key: GCMCase16.key, iv: GCMCase16.iv, authenticating: GCMCase16.aad)
        }
        // The next operation on this thread must not inherit a stale error.
        #expect(try AES256GCM.open(AES256GCM.SealedBox(ciphertext: GCMCase16.ciphertext, tag: GCMCase16.tag),
                                   key: GCMCase16.key, iv: GCMCase16.iv, authenticating: GCMCase16.aad) == GCMCase16.plaintext)
    }

    @Test("keys and IVs of the wrong length are refused", arguments: [
        (31, 12), (33, 12), (0, 12), (32, 11), (32, 16), (32, 96), (32, 0),
    ])
    func wrongLengths(keyCount: Int, ivCount: Int) {
        let key = [UInt8](repeating: 1, count: keyCount), iv = [UInt8](repeating: 2, count: ivCount)
        #expect(throws: CryptoError.self) { try AES256GCM.seal([1, 2, 3], key: key, iv: iv, authenticating: []) }
        let box = AES256GCM.SealedBox(ciphertext: [1, 2, 3], tag: [UInt8](repeating: 0, count: 16))
        #expect(throws: CryptoError.self) { try AES256GCM.open(box, key: key, iv: iv, authenticating: []) }
    }
}
