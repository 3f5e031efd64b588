internal import COpenSSL

/// Compares two byte strings without leaking, through timing, where they first differ.
///
/// The lengths are not secret: arrays of different lengths compare unequal at once.
public func constantTimeEquals(_ a: [UInt8], _ b: [UInt8]) -> Bool {
    guard a.count == b.count else { return false }
    guard !a.isEmpty else { return true }
    return a.withUnsafeBytes { left in
        b.withUnsafeBytes { right in
            CRYPTO_memcmp(left.baseAddress, right.baseAddress, left.count) == 0
        }
    }
}

/// Cryptographically secure random bytes from OpenSSL's DRBG.
public enum SecureRandom {
    /// `count` random bytes.
    ///
    /// `RAND_bytes` fails only when the DRBG cannot be seeded; handing out predictable bytes
    /// instead would break challenges and key generation, so that is a fatal error.
    public static func bytes(count: Int) -> [UInt8] {
        precondition(count >= 0 && count <= Int(Int32.max), "invalid random byte count")
        guard count > 0 else { return [] }
        return [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            let result = RAND_bytes(buffer.baseAddress, Int32(count))
            precondition(result == 1, "RAND_bytes failed: the random generator is not seeded")
            initialized = count
        }
    }
}
