import AGCrypto

/// Request identifiers: the client's own when it sent a sane one, else a fresh random UUID.
public enum RequestID {
    /// Accepts 1–128 characters from `[A-Za-z0-9._:-]`, so an echoed id can never inject
    /// anything into headers or logs.
    public static func isSane(_ value: String) -> Bool {
        let utf8 = value.utf8
        guard !utf8.isEmpty, utf8.count <= 128 else { return false }
        return utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "_"),
                 UInt8(ascii: ":"), UInt8(ascii: "-"):
                true
            default:
                false
            }
        }
    }

    public static func resolve(_ incoming: String?) -> String {
        var generator = SystemRandomNumberGenerator()
        return resolve(incoming, using: &generator)
    }

    /// `resolve` drawing new ids from `generator` (a worker's `RequestIDGenerator`, which
    /// spares a getrandom system call per request).
    public static func resolve<G: RandomNumberGenerator>(_ incoming: String?, using generator: inout G) -> String {
        if let incoming, isSane(incoming) { return incoming }
        return newUUID(using: &generator)
    }

    /// A version 4 UUID, lower-case, from OpenSSL's CSPRNG (a token's `jti`): one `RAND_bytes`
    /// for its 16 bytes instead of two getrandom system calls.
    public static func newUUID() -> String {
        var generator = SecureRandomWords()
        return newUUID(using: &generator)
    }

    public static func newUUID<G: RandomNumberGenerator>(using generator: inout G) -> String {
        // The 16 random bytes are the two words' bytes, least significant first; version and
        // variant bits set as RFC 9562 asks. Written straight into the 36 output bytes.
        let words = (generator.next() as UInt64, generator.next() as UInt64)
        return String(unsafeUninitializedCapacity: 36) { out in
            var position = 0
            for index in 0..<16 {
                var byte = UInt8(truncatingIfNeeded: (index < 8 ? words.0 : words.1) >> UInt64(8 * (index % 8)))
                if index == 6 { byte = (byte & 0x0F) | 0x40 }
                if index == 8 { byte = (byte & 0x3F) | 0x80 }
                if index == 4 || index == 6 || index == 8 || index == 10 {
                    out[position] = UInt8(ascii: "-")
                    position += 1
                }
                out[position] = hexDigit(byte >> 4)
                out[position + 1] = hexDigit(byte & 0x0F)
                position += 2
            }
            return position
        }
    }

    @inline(__always)
    private static func hexDigit(_ nibble: UInt8) -> UInt8 {
        nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") + nibble - 10
    }
}

/// Request ids need to be unique, not secret: a per-worker xoshiro256** generator seeded once
/// from the system CSPRNG replaces two getrandom calls per request.
struct RequestIDGenerator: RandomNumberGenerator {
    private var state: (UInt64, UInt64, UInt64, UInt64)

    init() {
        var seed = SystemRandomNumberGenerator()
        state = (seed.next(), seed.next(), seed.next(), seed.next() | 1)
    }

    mutating func next() -> UInt64 {
        let result = rotate(state.1 &* 5, 7) &* 9
        let t = state.1 << 17
        state.2 ^= state.0
        state.3 ^= state.1
        state.1 ^= state.2
        state.0 ^= state.3
        state.2 ^= t
        state.3 = rotate(state.3, 45)
        return result
    }

    private func rotate(_ x: UInt64, _ k: UInt64) -> UInt64 {
        (x << k) | (x >> (64 - k))
    }
}

/// 64-bit words from `SecureRandom` (OpenSSL's DRBG, seeded by the system), drawn 16 bytes at
/// a time: a UUID's worth per call.
struct SecureRandomWords: RandomNumberGenerator {
    private var bytes: [UInt8] = []

    mutating func next() -> UInt64 {
        if bytes.isEmpty { bytes = SecureRandom.bytes(count: 16) }
        var word: UInt64 = 0
        for byte in bytes.suffix(8) { word = word << 8 | UInt64(byte) }
        bytes.removeLast(8)
        return word
    }
}
