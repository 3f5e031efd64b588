import AGCrypto
import AGHTTP

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

    public static func newUUID<G: RandomNumberGenerator>(using generator: inout G) -> String {
        String(decoding: newUUIDText(using: &generator).bytes, as: UTF8.self)
    }

    /// A fresh UUID spelled into a request id's inline words (`RequestIdentifier`).
    static func newUUIDText<G: RandomNumberGenerator>(using generator: inout G) -> RequestIdentifier.UUIDText {
        // The 16 random bytes are the two words' bytes, least significant first; version (the
        // high nibble of byte 6: 4) and variant (the top bits of byte 8: 10) set as RFC 9562
        // asks, on the words. Each word's eight bytes become sixteen hex digits in two words
        // (`hexDigits`), shifted into the text's five words around the dashes: a table lookup
        // per byte cost ~270 instructions per request.
        let first = (generator.next() as UInt64) & ~(0xF0 << 48) | (0x40 << 48)
        let second = (generator.next() as UInt64) & ~0xC0 | 0x80
        let (a, b) = hexDigits(first)
        let (c, d) = hexDigits(second)
        let dash: UInt64 = 0x2D
        // xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx: digits 0–7 | dash, 8–11, dash, 12–13 |
        // 14–15, dash, 16–19, dash | 20–27 | 28–31 (the word's last four bytes unused).
        return RequestIdentifier.UUIDText(words: (
            a,
            dash | (b & 0xFFFF_FFFF) << 8 | dash << 40 | (b >> 32 & 0xFFFF) << 48,
            b >> 48 | dash << 16 | (c & 0xFFFF_FFFF) << 24 | dash << 56,
            c >> 32 | (d & 0xFFFF_FFFF) << 32,
            d >> 32))
    }

    /// The lower-case hex digits of `word`'s bytes, least significant byte first and each
    /// byte's high nibble first, as two words of ASCII in memory order: the first four bytes'
    /// eight digits, then the last four's.
    @inline(__always)
    static func hexDigits(_ word: UInt64) -> (UInt64, UInt64) {
        let high = (word >> 4) & 0x0F0F_0F0F_0F0F_0F0F
        let low = word & 0x0F0F_0F0F_0F0F_0F0F
        // Four bytes spread to every other byte; a byte's high nibble goes first in memory
        // (the lower byte of each pair), its low nibble second.
        func spread(_ x: UInt64) -> UInt64 {
            var x = x & 0xFFFF_FFFF
            x = (x | (x << 16)) & 0x0000_FFFF_0000_FFFF
            return (x | (x << 8)) & 0x00FF_00FF_00FF_00FF
        }
        // Nibble values to ASCII: '0' + n, and 39 more for 10–15 (n + 0x76 reaches 0x80).
        func ascii(_ nibbles: UInt64) -> UInt64 {
            let letters = ((nibbles &+ 0x7676_7676_7676_7676) & 0x8080_8080_8080_8080) >> 7
            return nibbles &+ 0x3030_3030_3030_3030 &+ letters &* 39
        }
        return (ascii(spread(high) | (spread(low) << 8)), ascii(spread(high >> 32) | (spread(low >> 32) << 8)))
    }
}

/// One request's id as its answers and log line carry it: the client's own (when
/// `RequestID.isSane`) or a fresh UUID kept as its 36 characters inside the value. A generated
/// id is spelled once and written as bytes wherever it goes; as a `String` it cost an
/// allocation, a UTF-8 check, its references' traffic and a free (~600 instructions per
/// proxied request).
struct RequestIdentifier: Sendable, Equatable, CustomStringConvertible, ExpressibleByStringLiteral {
    /// A UUID's 36 ASCII bytes in five words, each least significant byte first (the last
    /// word's upper four bytes unused, zero).
    struct UUIDText: Sendable, Equatable {
        var words: (UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0)

        static func == (lhs: UUIDText, rhs: UUIDText) -> Bool { lhs.words == rhs.words }

        /// The 36 bytes.
        var bytes: [UInt8] {
            var out = [UInt8]()
            out.reserveCapacity(36)
            func put(_ word: UInt64, _ count: Int) {
                for index in 0..<count { out.append(UInt8(truncatingIfNeeded: word >> (8 * UInt64(index)))) }
            }
            put(words.0, 8)
            put(words.1, 8)
            put(words.2, 8)
            put(words.3, 8)
            put(words.4, 4)
            return out
        }
    }

    private enum Spelling: Sendable, Equatable {
        case offered(String)
        case generated(UUIDText)
    }

    private let spelling: Spelling

    /// The client's id, already found sane (or a test's).
    init(_ offered: String) { spelling = .offered(offered) }

    init(stringLiteral value: String) { self.init(value) }

    init(_ generated: UUIDText) { spelling = .generated(generated) }

    /// The id's length in bytes.
    var utf8Count: Int {
        switch spelling {
        case .offered(let text): text.utf8.count
        case .generated: 36
        }
    }

    /// Appends the id's bytes: a generated one as its five words (`write(to:)` a cursor, in
    /// room for the length and the last word's four spare bytes).
    func write(to writer: inout HTTPHeadWriter) {
        writer.appendWriting(upTo: utf8Count + 4) { write(to: &$0) }
    }

    /// Writes the id's bytes into reserved room (four bytes more than its length: the last
    /// word is stored whole).
    func write(to out: inout ByteCursor) {
        switch spelling {
        case .offered(let text):
            out.put(text)
        case .generated(let uuid):
            out.put(word: uuid.words.0, count: 8)
            out.put(word: uuid.words.1, count: 8)
            out.put(word: uuid.words.2, count: 8)
            out.put(word: uuid.words.3, count: 8)
            out.put(word: uuid.words.4, count: 4)
        }
    }

    var description: String {
        switch spelling {
        case .offered(let text): text
        case .generated(let uuid): String(decoding: uuid.bytes, as: UTF8.self)
        }
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
