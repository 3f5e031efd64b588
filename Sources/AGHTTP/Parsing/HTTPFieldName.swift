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

    /// The lower-case spelling of each case, by raw value.
    static let lowercased: [[UInt8]] = allCases.map { Array($0.text.lowercased().utf8) }

    /// The candidates for each name length (index = length), so most fields cost one table
    /// look-up and at most three short comparisons.
    private static let byLength: [[HTTPFieldName]] = {
        var table = [[HTTPFieldName]](repeating: [], count: 20)
        for name in allCases where name != .other { table[name.text.utf8.count].append(name) }
        return table
    }()

    /// Classifies `bytes[start..<end]`: `exact` compares ASCII case-insensitively, `lookalike`
    /// also reads `_` as `-` (what some frameworks do to names, and so what spoofing tries).
    static func classify(_ bytes: Span<UInt8>, _ start: Int, _ end: Int) -> (exact: HTTPFieldName, lookalike: HTTPFieldName) {
        let count = end - start
        guard count < byLength.count else { return (.other, .other) }
        for candidate in byLength[count] {
            let target = lowercased[Int(candidate.rawValue)]
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
                if byte != target[index] { break }
                index += 1
            }
            if index == count { return (underscore ? .other : candidate, candidate) }
        }
        return (.other, .other)
    }
}
