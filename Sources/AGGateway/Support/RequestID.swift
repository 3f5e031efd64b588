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
        // The 16 random bytes are the two words' bytes, least significant first; version (the
        // high nibble of byte 6: 4) and variant (the top bits of byte 8: 10) set as RFC 9562
        // asks, on the words. Written straight into the 36 output bytes, a byte at a time from
        // the low end of a shifting word.
        let first = (generator.next() as UInt64) & ~(0xF0 << 48) | (0x40 << 48)
        let second = (generator.next() as UInt64) & ~0xC0 | 0x80
        return String(unsafeUninitializedCapacity: 36) { out in
            let digits = hexDigits.utf8Start
            var word = first
            var position = 0
            for index in 0..<16 {
                if index == 8 { word = second }
                if index == 4 || index == 6 || index == 8 || index == 10 {
                    out[position] = UInt8(ascii: "-")
                    position += 1
                }
                let byte = Int(truncatingIfNeeded: word & 0xFF)
                word >>= 8
                out[position] = digits[byte >> 4]
                out[position + 1] = digits[byte & 0x0F]
                position += 2
            }
            return position
        }
    }

    private static let hexDigits: StaticString = "0123456789abcdef"
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
