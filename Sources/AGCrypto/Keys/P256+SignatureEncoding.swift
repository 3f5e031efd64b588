internal import COpenSSL

extension P256 {
    /// Converts a DER `ECDSA-Sig-Value` to the fixed-width JWS form `r || s` (32 bytes each).
    public static func rawSignature(fromDER der: [UInt8]) throws(CryptoError) -> [UInt8] {
        let operation = "P256.rawSignature(fromDER:)"
        let signature: OpaquePointer? = withCBytes(der) { base, count in
            var cursor: UnsafePointer<UInt8>? = base
            guard let parsed = d2i_ECDSA_SIG(nil, &cursor, count) else { return nil }
            guard cursor == base + count else {
                ECDSA_SIG_free(parsed)
                return nil
            }
            return parsed
        }
        guard let signature else { throw .invalidInput(operation, "malformed DER signature") }
        defer { ECDSA_SIG_free(signature) }
        let r = ECDSA_SIG_get0_r(signature)
        let s = ECDSA_SIG_get0_s(signature)
        var raw = [UInt8](repeating: 0, count: rawSignatureByteCount)
        let fits = raw.withUnsafeMutableBufferPointer { buffer in
            BN_bn2binpad(r, buffer.baseAddress, 32) == 32 && BN_bn2binpad(s, buffer.baseAddress! + 32, 32) == 32
        }
        guard fits else { throw .invalidInput(operation, "signature component wider than 32 bytes") }
        return raw
    }

    /// Converts a JWS `r || s` signature (exactly 64 bytes) to DER `ECDSA-Sig-Value`.
    public static func derSignature(fromRaw raw: [UInt8]) throws(CryptoError) -> [UInt8] {
        let operation = "P256.derSignature(fromRaw:)"
        guard raw.count == rawSignatureByteCount else {
            throw .invalidInput(operation, "expected \(rawSignatureByteCount) bytes")
        }
        guard let signature = ECDSA_SIG_new() else { throw .openSSL(operation) }
        defer { ECDSA_SIG_free(signature) }
        let assigned = raw.withUnsafeBufferPointer { buffer -> Bool in
            let r = BN_bin2bn(buffer.baseAddress, 32, nil)
            let s = BN_bin2bn(buffer.baseAddress! + 32, 32, nil)
            // ECDSA_SIG_set0 takes ownership of both numbers only when it succeeds.
            guard let r, let s, ECDSA_SIG_set0(signature, r, s) == 1 else {
                BN_free(r)
                BN_free(s)
                return false
            }
            return true
        }
        guard assigned else { throw .openSSL(operation) }
        let length = i2d_ECDSA_SIG(signature, nil)
        guard length > 0 else { throw .openSSL(operation) }
        var der = [UInt8](repeating: 0, count: Int(length))
        let written = der.withUnsafeMutableBufferPointer { buffer -> Int32 in
            var cursor = buffer.baseAddress
            return i2d_ECDSA_SIG(signature, &cursor)
        }
        guard written == length else { throw .openSSL(operation) }
        return der
    }
}

extension P256 {
    /// The order `n` of the P-256 group, big-endian.
    static let order: [UInt8] = [
        0xFF, 0xFF, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x00, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
        0xBC, 0xE6, 0xFA, 0xAD, 0xA7, 0x17, 0x9E, 0x84, 0xF3, 0xB9, 0xCA, 0xC2, 0xFC, 0x63, 0x25, 0x51,
    ]
    /// `floor(n / 2)`, big-endian: the largest `s` of a low-S signature.
    static let halfOrder: [UInt8] = [
        0x7F, 0xFF, 0xFF, 0xFF, 0x80, 0x00, 0x00, 0x00, 0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
        0xDE, 0x73, 0x7D, 0x56, 0xD3, 0x8B, 0xCF, 0x42, 0x79, 0xDC, 0xE5, 0x61, 0x7E, 0x31, 0x92, 0xA8,
    ]

    /// Whether the raw (`r || s`) signature has `s <= n/2`.
    ///
    /// ECDSA accepts both `(r, s)` and `(r, n - s)`; a verifier that wants one spelling per
    /// signed message refuses the high one. Anything but 64 bytes is not low-S.
    public static func isLowS(rawSignature raw: [UInt8]) -> Bool {
        guard raw.count == rawSignatureByteCount else { return false }
        for index in 0..<32 where raw[32 + index] != halfOrder[index] {
            return raw[32 + index] < halfOrder[index]
        }
        return true
    }

    /// The same signature with `s` replaced by `n - s` when `s > n/2`; low-S signatures and
    /// anything that is not 64 bytes come back unchanged.
    public static func lowSNormalized(rawSignature raw: [UInt8]) -> [UInt8] {
        guard raw.count == rawSignatureByteCount, !isLowS(rawSignature: raw) else { return raw }
        return negatingS(rawSignature: raw)
    }

    /// The other spelling of a raw (`r || s`, 64 bytes, `0 < s < n`) signature: `s` replaced by
    /// `n - s`, which verifies as well (what a low-S verifier must refuse).
    public static func negatingS(rawSignature raw: [UInt8]) -> [UInt8] {
        precondition(raw.count == rawSignatureByteCount, "a raw P-256 signature is 64 bytes")
        var negated = raw
        var borrow = 0
        for index in stride(from: 31, through: 0, by: -1) {
            let difference = Int(order[index]) - Int(raw[32 + index]) - borrow
            borrow = difference < 0 ? 1 : 0
            negated[32 + index] = UInt8(difference + borrow * 256)
        }
        return negated
    }
}
