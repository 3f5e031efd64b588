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

    /// Every case's lower-case spelling, end to end (one flat buffer: no inner arrays to
    /// retain while classifying), and where each starts, by raw value.
    static let spellings: [UInt8] = allCases.flatMap { Array($0.text.lowercased().utf8) }
    static let spellingStarts: [Int] = {
        var starts: [Int] = []
        var offset = 0
        for name in allCases {
            starts.append(offset)
            offset += name.text.utf8.count
        }
        return starts
    }()

    /// Up to `slotsPerLength` candidate raw values for each name length (0 = none), so most
    /// fields cost one table look-up and at most three short comparisons.
    static let slotsPerLength = 3
    static let maxLength = 19
    static let candidates: [UInt8] = {
        var table = [UInt8](repeating: 0, count: (maxLength + 1) * slotsPerLength)
        for name in allCases where name != .other {
            let base = name.text.utf8.count * slotsPerLength
            let slot = (base..<(base + slotsPerLength)).first { table[$0] == 0 }!
            table[slot] = name.rawValue
        }
        return table
    }()

    /// Classifies `bytes[start..<end]`: `exact` compares ASCII case-insensitively, `lookalike`
    /// also reads `_` as `-` (what some frameworks do to names, and so what spoofing tries).
    static func classify(_ bytes: Span<UInt8>, _ start: Int, _ end: Int) -> (exact: HTTPFieldName, lookalike: HTTPFieldName) {
        let count = end - start
        guard count <= maxLength else { return (.other, .other) }
        let spellings = Self.spellings.span
        let candidates = Self.candidates.span
        let starts = Self.spellingStarts.span
        for slot in (count * slotsPerLength)..<(count * slotsPerLength + slotsPerLength) {
            let raw = candidates[slot]
            if raw == 0 { break }
            let target = starts[Int(raw)]
            var underscore = false
            var index = 0
            while index < count {
                var byte = bytes[start + index]
                if byte == UInt8(ascii: "_") {
                    underscore = true
                    byte = UInt8(ascii: "-")
                } else if byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") {
                    byte |= 0x20
                }
                if byte != spellings[target + index] { break }
                index += 1
            }
            if index == count {
                let name = HTTPFieldName(rawValue: raw)!
                return (underscore ? .other : name, name)
            }
        }
        return (.other, .other)
    }
}
