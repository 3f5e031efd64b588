/// The header names the gateway acts on, interned: every parsed field is classified once, so a
/// lookup or a forwarding decision compares one byte instead of a string (Envoy's inline
/// headers). Every other name is `.other` and travels as the bytes it arrived as.
public enum HTTPFieldName: UInt8, Sendable, CaseIterable {
    case other
    case host
    case contentLength
    case transferEncoding
    case connection
    case expect
    case authorization
    case contentType
    case xForwardedFor
    case xForwardedProto
    case xForwardedHost
    case forwarded
    case xRequestID
    case te
    case trailer
    case upgrade
    case keepAlive
    case proxyConnection
    case proxyAuthorization
    case proxyAuthenticate
    case xTeamID
    case xBundleID
    case date

    /// The canonical spelling, as the gateway writes it.
    public var text: String { spelling.description }

    /// `text` as static bytes: what the head writer copies (a `String` append cost three
    /// times as much, ten times per proxied request).
    public var spelling: StaticString {
        switch self {
        case .other: ""
        case .host: "Host"
        case .contentLength: "Content-Length"
        case .transferEncoding: "Transfer-Encoding"
        case .connection: "Connection"
        case .expect: "Expect"
        case .authorization: "Authorization"
        case .contentType: "Content-Type"
        case .xForwardedFor: "X-Forwarded-For"
        case .xForwardedProto: "X-Forwarded-Proto"
        case .xForwardedHost: "X-Forwarded-Host"
        case .forwarded: "Forwarded"
        case .xRequestID: "X-Request-ID"
        case .te: "TE"
        case .trailer: "Trailer"
        case .upgrade: "Upgrade"
        case .keepAlive: "Keep-Alive"
        case .proxyConnection: "Proxy-Connection"
        case .proxyAuthorization: "Proxy-Authorization"
        case .proxyAuthenticate: "Proxy-Authenticate"
        case .xTeamID: "X-Team-ID"
        case .xBundleID: "X-Bundle-ID"
        case .date: "Date"
        }
    }

    /// Hop-by-hop fields (RFC 9110 section 7.6.1) and the message-control fields each hop
    /// writes for itself (`Content-Length`, `Expect`): never copied from one hop to the next.
    public var isHopControl: Bool {
        switch self {
        case .contentLength, .transferEncoding, .connection, .expect, .te, .trailer, .upgrade, .keepAlive,
             .proxyConnection:
            true
        default:
            false
        }
    }

    /// The name for `text` compared case-insensitively, or `.other`.
    public init(_ text: String) {
        let bytes = Array(text.utf8)
        self = Self.classify(bytes.span, 0, bytes.count).exact
    }

    /// Every case's lower-case spelling as three little-endian words, zero-padded (a name is
    /// at most `maxLength` = 19 bytes), by raw value: a name is classified by comparing whole
    /// words, not bytes.
    private static var spellingWords: [UInt64] {
        allCases.flatMap { name -> [UInt64] in
            let bytes = Array(name.text.lowercased().utf8)
            return (0..<wordsPerName).map { index in
                var word: UInt64 = 0
                for (offset, byte) in bytes.dropFirst(index * 8).prefix(8).enumerated() { word |= UInt64(byte) << (8 * UInt64(offset)) }
                return word
            }
        }
    }
    static let wordsPerName = 3

    /// Up to `slotsPerLength` candidate raw values for each name length (0 = none), so most
    /// fields cost one table look-up and at most three word comparisons.
    static let slotsPerLength = 3
    static let maxLength = 19
    private static var candidates: [UInt8] {
        var table = [UInt8](repeating: 0, count: (maxLength + 1) * slotsPerLength)
        for name in allCases where name != .other {
            let base = name.text.utf8.count * slotsPerLength
            let slot = (base..<(base + slotsPerLength)).first { table[$0] == 0 }!
            table[slot] = name.rawValue
        }
        return table
    }

    /// `candidates` and `spellingWords`, built once as raw memory that is never freed, for a
    /// parser to fetch once per head: each access to a `static let` array goes through
    /// `swift_once`, two per field (~20 % of a classification) when `classify` read them itself.
    struct Tables: @unchecked Sendable {
        // Invariant: both point to immutable copies that live as long as the process.
        let candidates: UnsafePointer<UInt8>
        let spellings: UnsafePointer<UInt64>
    }

    static let tables: Tables = {
        let candidateTable = Self.candidates
        let candidates = UnsafeMutablePointer<UInt8>.allocate(capacity: candidateTable.count)
        candidates.initialize(from: candidateTable, count: candidateTable.count)
        let spellingTable = Self.spellingWords
        let spellings = UnsafeMutablePointer<UInt64>.allocate(capacity: spellingTable.count)
        spellings.initialize(from: spellingTable, count: spellingTable.count)
        return Tables(candidates: candidates, spellings: spellings)
    }()

    /// Classifies `bytes[start..<end]`: `exact` compares ASCII case-insensitively, `lookalike`
    /// also reads `_` as `-` (what some frameworks do to names, and so what spoofing tries).
    static func classify(_ bytes: Span<UInt8>, _ start: Int, _ end: Int) -> (exact: HTTPFieldName, lookalike: HTTPFieldName) {
        classify(bytes, start, end, tables)
    }

    /// `classify` with the tables fetched by the caller.
    static func classify(_ bytes: Span<UInt8>, _ start: Int, _ end: Int, _ tables: Tables) -> (exact: HTTPFieldName, lookalike: HTTPFieldName) {
        let count = end - start
        guard count > 0, count <= maxLength else { return (.other, .other) }
        // In bounds: `count` is at most `maxLength`, the tables hold every length's slots and
        // every case's words.
        let candidates = tables.candidates
        let first = candidates[count * slotsPerLength]
        guard first != 0 else { return (.other, .other) }
        var underscores: UInt64 = 0
        let word0 = folded(bytes, start, count, &underscores)
        let word1 = count > 8 ? folded(bytes, start + 8, count - 8, &underscores) : 0
        let word2 = count > 16 ? folded(bytes, start + 16, count - 16, &underscores) : 0
        let spellings = tables.spellings
        for slot in (count * slotsPerLength)..<(count * slotsPerLength + slotsPerLength) {
            let raw = candidates[slot]
            if raw == 0 { break }
            let base = Int(raw) * wordsPerName
            if spellings[base] == word0, spellings[base + 1] == word1, spellings[base + 2] == word2 {
                let name = HTTPFieldName(rawValue: raw)!
                return (underscores != 0 ? .other : name, name)
            }
        }
        return (.other, .other)
    }

    /// `word`'s eight bytes with A–Z lowered, the others (obs-text included) unchanged.
    /// Upper-case bytes are found on their low seven bits (no carry leaves a byte): at least
    /// "A" and not past "Z", high bit clear.
    @inline(__always)
    static func loweredWord(_ word: UInt64) -> UInt64 {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let high: UInt64 = 0x8080_8080_8080_8080
        let low = word & ~high
        let atLeastA = (low &+ ones &* (0x80 - 0x41)) & high
        let pastZ = (low &+ ones &* (0x80 - 0x5B)) & high
        return word | ((atLeastA & ~pastZ & ~word) >> 2)
    }

    /// The first `min(length, 8)` bytes from `start` as a little-endian word, the bytes past
    /// them zero, A–Z lowered and `_` read as `-` (and flagged in `underscores`). One unaligned
    /// load when eight bytes are there to read (a name is followed by at least its colon and
    /// the head's blank line), else byte by byte.
    @inline(__always)
    private static func folded(_ bytes: Span<UInt8>, _ start: Int, _ length: Int, _ underscores: inout UInt64) -> UInt64 {
        var word: UInt64 = 0
        if start + 8 <= bytes.count {
            word = UInt64(littleEndian: bytes.bytes.unsafeLoadUnaligned(fromByteOffset: start, as: UInt64.self))
            if length < 8 { word &= (1 &<< (8 &* UInt64(length))) &- 1 }
        } else {
            for offset in 0..<min(length, 8) { word |= UInt64(bytes[start + offset]) << (8 * UInt64(offset)) }
        }
        let ones: UInt64 = 0x0101_0101_0101_0101
        let high: UInt64 = 0x8080_8080_8080_8080
        word = loweredWord(word)
        // "_" bytes, exactly (a zero byte of word ^ "_…", tested without a borrow), become "-".
        let x = word ^ (ones &* 0x5F)
        let isUnderscore = ~(((x & ~high) &+ ~high) | x | ~high)
        underscores |= isUnderscore
        return word ^ ((isUnderscore >> 7) &* (0x5F ^ 0x2D))
    }
}
