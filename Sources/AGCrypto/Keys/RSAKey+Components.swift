extension RSAKey.PublicKey {
    /// A key from its modulus and public exponent (unsigned big-endian, as in JWK `n`/`e`).
    public init(modulus: [UInt8], publicExponent: [UInt8]) throws(CryptoError) {
        let operation = "RSAKey.PublicKey(modulus:publicExponent:)"
        let n = modulus.drop { $0 == 0 }
        let e = publicExponent.drop { $0 == 0 }
        guard !n.isEmpty, !e.isEmpty, e.count <= 8 else {
            throw .invalidInput(operation, "empty modulus or exponent, or exponent too large")
        }
        let rsaPublicKey = DER.sequence(DER.unsignedInteger(Array(n)) + DER.unsignedInteger(Array(e)))
        // AlgorithmIdentifier { rsaEncryption, NULL }
        let algorithm: [UInt8] = [0x30, 0x0D, 0x06, 0x09, 0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x01, 0x01, 0x05, 0x00]
        let spki = DER.sequence(algorithm + DER.element(tag: 0x03, [0x00] + rsaPublicKey))
        try self.init(validated: EVPKey.publicKey(der: spki, operation: operation), operation: operation)
    }
}

/// The few DER constructors needed to wrap raw key components for OpenSSL.
enum DER {
    static func length(_ count: Int) -> [UInt8] {
        if count < 0x80 { return [UInt8(count)] }
        var bytes = [UInt8]()
        var remaining = count
        while remaining > 0 {
            bytes.insert(UInt8(remaining & 0xFF), at: 0)
            remaining >>= 8
        }
        return [0x80 | UInt8(bytes.count)] + bytes
    }

    static func element(tag: UInt8, _ content: [UInt8]) -> [UInt8] {
        [tag] + length(content.count) + content
    }

    static func sequence(_ content: [UInt8]) -> [UInt8] {
        element(tag: 0x30, content)
    }

    /// INTEGER for a non-negative big-endian number without leading zero bytes.
    static func unsignedInteger(_ magnitude: [UInt8]) -> [UInt8] {
        element(tag: 0x02, magnitude.first.map { $0 >= 0x80 } == true ? [0x00] + magnitude : magnitude)
    }
}
