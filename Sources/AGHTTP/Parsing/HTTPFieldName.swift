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

    /// The canonical spelling, as the gateway writes it.
    public var text: String {
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

    /// Every case's lower-case spelling, end to end, where each starts (by raw value), and up to
    /// `slotsPerLength` candidate raw values for each name length (0 = none): most fields cost
    /// one table look-up and at most three short comparisons. Raw memory, built once and never
    /// freed, so that classifying a field touches no array (no retain, no bounds check, one
    /// lazy-global check for the whole table).
    struct Table: @unchecked Sendable {
        let spellings: UnsafeMutablePointer<UInt8>
        let starts: UnsafeMutablePointer<Int32>
        let candidates: UnsafeMutablePointer<UInt8>
        /// Each byte as a name compares: ASCII upper case folded to lower case, `_` read as `-`.
        let folded: UnsafeMutablePointer<UInt8>

        init() {
            let all = HTTPFieldName.allCases
            let text = all.flatMap { Array($0.text.lowercased().utf8) }
            spellings = .allocate(capacity: text.count)
            spellings.initialize(from: text, count: text.count)
            starts = .allocate(capacity: all.count)
            var offset: Int32 = 0
            for name in all {
                starts[Int(name.rawValue)] = offset
                offset += Int32(name.text.utf8.count)
            }
            let slots = (HTTPFieldName.maxLength + 1) * HTTPFieldName.slotsPerLength
            let table = UnsafeMutablePointer<UInt8>.allocate(capacity: slots)
            table.initialize(repeating: 0, count: slots)
            for name in all where name != .other {
                let base = name.text.utf8.count * HTTPFieldName.slotsPerLength
                let slot = (base..<(base + HTTPFieldName.slotsPerLength)).first { table[$0] == 0 }!
                table[slot] = name.rawValue
            }
            candidates = table
            folded = .allocate(capacity: 256)
            for byte in 0...255 {
                let value = UInt8(byte)
                folded[byte] = value == UInt8(ascii: "_") ? UInt8(ascii: "-")
                    : value >= UInt8(ascii: "A") && value <= UInt8(ascii: "Z") ? value | 0x20 : value
            }
        }
    }

    static let table = Table()
    static let slotsPerLength = 3
    static let maxLength = 19

    /// Classifies `bytes[start..<end]`: `exact` compares ASCII case-insensitively, `lookalike`
    /// also reads `_` as `-` (what some frameworks do to names, and so what spoofing tries).
    static func classify(_ bytes: Span<UInt8>, _ start: Int, _ end: Int) -> (exact: HTTPFieldName, lookalike: HTTPFieldName) {
        let count = end - start
        guard count > 0, count <= maxLength, start >= 0, end <= bytes.count else { return (.other, .other) }
        let table = Self.table
        return bytes.withUnsafeBufferPointer { buffer -> (exact: HTTPFieldName, lookalike: HTTPFieldName) in
            let name = buffer.baseAddress! + start
            let first = count * slotsPerLength
            for slot in first..<(first + slotsPerLength) {
                let raw = table.candidates[slot]
                if raw == 0 { break }
                let spelling = table.spellings + Int(table.starts[Int(raw)])
                var index = 0
                while index < count, table.folded[Int(name[index])] == spelling[index] { index += 1 }
                guard index == count else { continue }
                var underscore = false
                for offset in 0..<count where name[offset] == UInt8(ascii: "_") { underscore = true }
                let matched = HTTPFieldName(rawValue: raw)!
                return (underscore ? .other : matched, matched)
            }
            return (.other, .other)
        }
    }
}
