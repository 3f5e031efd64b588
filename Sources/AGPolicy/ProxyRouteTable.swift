import AGConfig
import AGFormats

/// A tenant's `routes`, ordered for longest-prefix matching; built once per snapshot.
///
/// Matching is segment-aware: a prefix matches the path equal to it, or a path continuing it
/// with `/` (so `/api` matches `/api` and `/api/x` but not `/apiary`). A prefix ending in `/`
/// matches everything below it and the path without that slash (`/v1/` matches `/v1`).
public struct ProxyRouteTable: Sendable {
    /// Longest prefix first, so the first match is the most specific one.
    public let routes: [RouteConfig]

    public init(_ routes: [RouteConfig]) {
        self.routes = routes.sorted { $0.prefix.utf8.count > $1.prefix.utf8.count }
    }

    /// The most specific route for `path` (already normalized by `ProxyPath`).
    public func match(_ path: String) -> RouteConfig? {
        routes.first { Self.matches(path, prefix: $0.prefix) }
    }

    public static func matches(_ path: String, prefix: String) -> Bool {
        // Over the strings' spans: `UTF8View.starts(with:)` cost ~40 instructions a byte.
        let p = path.utf8.span, q = prefix.utf8.span
        if q.count > 0, q[q.count - 1] == UInt8(ascii: "/") {
            if startsWith(p, q) { return true }
            return p.count == q.count - 1 && startsWith(q, p)
        }
        guard startsWith(p, q) else { return false }
        return p.count == q.count || p[q.count] == UInt8(ascii: "/")
    }

    private static func startsWith(_ bytes: Span<UInt8>, _ prefix: Span<UInt8>) -> Bool {
        guard bytes.count >= prefix.count else { return false }
        for index in 0..<prefix.count where bytes[index] != prefix[index] { return false }
        return true
    }
}

/// The request path as routes are matched against it.
///
/// Upstream frameworks commonly merge `//`, decode percent-encoded letters and resolve dot
/// segments before routing. Matching the raw path could then apply a lenient route's rules
/// (`auth: none`) to a path the upstream serves under a strict one, so the gateway matches on
/// the normalized form, forwards the path untouched, and refuses the shapes whose meaning
/// differs between servers: dot segments (also encoded), encoded `/` or `\`, a raw `\`, NUL.
public enum ProxyPath {
    /// The path routes are matched against; `nil` when the target must be refused (400).
    public static func normalizedForMatching(_ path: Substring) -> String? {
        isAlreadyNormal(path.utf8) ? String(path) : normalizedBySegments(path)
    }

    /// True for the everyday path, which normalizing leaves as it is: it starts with `/` and
    /// has no `%`, `;`, `\`, NUL, empty segment or dot segment. One pass, no allocation.
    static func isAlreadyNormal(_ path: Substring.UTF8View) -> Bool {
        // Over the span: a `UTF8View` iterator cost ~50 instructions a byte.
        let bytes = path.span
        guard bytes.count > 0, bytes[0] == UInt8(ascii: "/") else { return false }
        var segmentLength = 0
        var dots = 0
        for index in 1..<bytes.count {
            switch bytes[index] {
            case UInt8(ascii: "/"):
                // An empty segment (`//`) is merged, a dot segment refused: both are slow-path work.
                if segmentLength == 0 || (segmentLength == dots && dots <= 2) { return false }
                segmentLength = 0
                dots = 0
                continue
            case UInt8(ascii: "%"), UInt8(ascii: ";"), UInt8(ascii: "\\"), 0:
                return false
            case UInt8(ascii: "."):
                dots += 1
            default:
                break
            }
            segmentLength += 1
        }
        return !(segmentLength > 0 && segmentLength == dots && dots <= 2)
    }

    /// The full normalization, segment by segment: what `normalizedForMatching` computes for
    /// any path that is not `isAlreadyNormal` (and the reference it is tested against).
    static func normalizedBySegments(_ path: Substring) -> String? {
        let bytes = Array(path.utf8)
        guard bytes.first == UInt8(ascii: "/") else { return nil }
        var decoded: [UInt8] = []
        decoded.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "%") {
                guard index + 2 < bytes.count, let high = PercentEncoding.hexValue(bytes[index + 1]), let low = PercentEncoding.hexValue(bytes[index + 2]) else {
                    return nil
                }
                let value = high << 4 | low
                switch value {
                case UInt8(ascii: "/"), UInt8(ascii: "\\"), 0:
                    return nil
                case _ where PercentEncoding.isUnreserved(value):
                    decoded.append(value)
                default:
                    // Other escapes keep their meaning; upper-case them so `%3a` and `%3A` match alike.
                    decoded.append(UInt8(ascii: "%"))
                    decoded.append(upperHex(high))
                    decoded.append(upperHex(low))
                }
                index += 3
                continue
            }
            if byte == UInt8(ascii: "\\") || byte == 0 { return nil }
            if byte == UInt8(ascii: "/"), decoded.last == UInt8(ascii: "/") {
                index += 1
                continue
            }
            decoded.append(byte)
            index += 1
        }
        for segment in bytes.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: true)
        where isAmbiguousSegment(Array(segment)) {
            return nil
        }
        return String(decoding: decoded, as: UTF8.self)
    }

    /// A segment some upstream may read as a dot segment or a separator: after percent-decoding
    /// twice (servers that decode again after routing) and cutting path parameters at `;`
    /// (Tomcat reads `/..;/` as `/../`), it is `.` or `..`, or it holds `/`, `\` or NUL.
    private static func isAmbiguousSegment(_ raw: [UInt8]) -> Bool {
        var segment = percentDecoded(percentDecoded(raw))
        if let semicolon = segment.firstIndex(of: UInt8(ascii: ";")) { segment.removeSubrange(semicolon...) }
        if segment == [UInt8(ascii: ".")] || segment == [UInt8(ascii: "."), UInt8(ascii: ".")] { return true }
        return segment.contains { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "\\") || $0 == 0 }
    }

    /// Every valid `%XX` decoded; anything else kept as it is.
    private static func percentDecoded(_ bytes: [UInt8]) -> [UInt8] {
        guard bytes.contains(UInt8(ascii: "%")) else { return bytes }
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            if bytes[index] == UInt8(ascii: "%"), index + 2 < bytes.count,
               let high = PercentEncoding.hexValue(bytes[index + 1]), let low = PercentEncoding.hexValue(bytes[index + 2]) {
                out.append(high << 4 | low)
                index += 3
            } else {
                out.append(bytes[index])
                index += 1
            }
        }
        return out
    }

    private static func upperHex(_ nibble: UInt8) -> UInt8 {
        nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "A") + nibble - 10
    }
}
