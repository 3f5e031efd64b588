internal import COpenSSL

/// Random bytes for one thread, drawn from OpenSSL's DRBG a block at a time.
///
/// Every `RAND_bytes` call takes the DRBG's lock and checks for a fork with a `getpid` system
/// call, ~6,700 instructions however few bytes it returns; a challenge and a token's `jti` each
/// made one. A buffer draws `blockSize` bytes per call and hands them out in order. A byte handed
/// out is zeroed in the block, so the block only ever holds bytes nobody has seen.
///
/// For values that must be unpredictable but are not keys (challenges, token ids, nonces): keys
/// are generated inside OpenSSL. Owned by one thread (a worker), and not carried across a fork,
/// whose child would hand out the parent's bytes again (the gateway does not fork).
public final class SecureRandomBuffer: RandomNumberGenerator {
    public static let blockSize = 512
    private(set) var block = [UInt8](repeating: 0, count: SecureRandomBuffer.blockSize)
    private(set) var position = SecureRandomBuffer.blockSize

    public init() {}

    /// `count` (at most `blockSize`) fresh random bytes.
    public func bytes(count: Int) -> [UInt8] {
        precondition(count >= 0 && count <= Self.blockSize, "invalid random byte count")
        return take(count) { block, range in Array(block[range]) }
    }

    /// A fresh random word (the generator protocol's one requirement).
    public func next() -> UInt64 {
        return take(8) { block, range in
            var word: UInt64 = 0
            for index in range { word = word << 8 | UInt64(block[index]) }
            return word
        }
    }

    /// Lends the next `count` bytes to `read`, then zeroes them.
    private func take<Result>(_ count: Int, _ read: ([UInt8], Range<Int>) -> Result) -> Result {
        if Self.blockSize - position < count { refill() }
        let range = position..<(position + count)
        let result = read(block, range)
        for index in range { block[index] = 0 }
        position += count
        return result
    }

    /// `RAND_bytes` fails only when the DRBG cannot be seeded; predictable bytes instead would
    /// break challenges, so that is a fatal error (as in `SecureRandom`).
    private func refill() {
        let filled = block.withUnsafeMutableBufferPointer { buffer in
            RAND_bytes(buffer.baseAddress, Int32(buffer.count))
        }
        precondition(filled == 1, "RAND_bytes failed: the random generator is not seeded")
        position = 0
    }
}
