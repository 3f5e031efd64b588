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
