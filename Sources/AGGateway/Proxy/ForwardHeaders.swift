import AGConfig
import AGPolicy
import AGHTTP

/// What a tenant's forwarded requests look like, derived once per snapshot from its
/// `forward` and `token` settings and its upstream.
struct ForwardHeaderPolicy: Sendable {
    let mapper: ClaimHeaderMapper
    /// Carries the base64url verified payload; `nil` when disabled.
    let payloadHeader: String?
    /// Where the token arrives (`Authorization` unless `token.header` says otherwise).
    let tokenHeader: TokenHeaderName
    /// `forward.forward_authorization`: pass the token header on to the upstream.
    let forwardsTokenHeader: Bool
    /// `Host` sent upstream: the upstream's authority, as written in the tenant file.
    let upstreamHost: String
    /// Normalized names of every header the gateway injects from claims (mapped + payload).
    private let injectedNames: [[UInt8]]
    private let tokenHeaderName: [UInt8]

    init(forward: ForwardConfig, tokenHeader: String, upstreamHost: String) {
        mapper = ClaimHeaderMapper(claims: forward.claims)
        payloadHeader = forward.payloadHeader
        self.tokenHeader = TokenHeaderName(tokenHeader)
        forwardsTokenHeader = forward.forwardAuthorization
        self.upstreamHost = upstreamHost
        injectedNames = (forward.claims.map(\.header) + (forward.payloadHeader.map { [$0] } ?? [])).map(HeaderName.normalized)
        tokenHeaderName = HeaderName.normalized(tokenHeader)
    }

    /// The tenant selectors, normalized: forwarded as sent (the gateway checked them), but a
    /// spelling with `_` was never checked, and upstreams that read `_` as `-` would take it
    /// for one (an independent sweep got `X_Team_ID` of another tenant through; nginx drops
    /// names with `_` by default).
    private static let tenantSelectors = [HeaderName.normalized("X-Team-ID"), HeaderName.normalized("X-Bundle-ID")]

    /// Whether an inbound field could pass for a header the gateway vouches for: any
    /// `x-attest-*` name or a mapped name, with `_` read as `-`, in any case; and a tenant
    /// selector spelt with `_`.
    func isSpoofable(_ name: String) -> Bool {
        HeaderName.hasAttestPrefix(name) || injectedNames.contains { HeaderName.matches(name, $0) }
            || (name.contains("_") && Self.tenantSelectors.contains { HeaderName.matches(name, $0) })
    }

    func isTokenHeader(_ name: String) -> Bool {
        HeaderName.matches(name, tokenHeaderName)
    }

    /// `isSpoofable` on a parsed field's name bytes.
    func isSpoofable(_ bytes: Span<UInt8>, _ range: Range<Int>) -> Bool {
        if HeaderName.hasAttestPrefix(bytes, range) { return true }
        for name in injectedNames where HeaderName.matches(bytes, range, name) { return true }
        // Only a name of a selector's length with `_` where a selector has `-` is compared: two
        // byte reads per field (this runs for every field of every proxied request; a scan of
        // each such name cost 0.7 k instructions per request).
        let underscore = UInt8(ascii: "_"), start = range.lowerBound
        let spelt: Bool = switch range.count {
        case 9: bytes[start + 1] == underscore || bytes[start + 6] == underscore
        case 11: bytes[start + 1] == underscore || bytes[start + 8] == underscore
        default: false
        }
        return spelt && Self.tenantSelectors.contains { HeaderName.matches(bytes, range, $0) }
    }

    /// `isTokenHeader` on a parsed field's name bytes.
    func isTokenHeader(_ bytes: Span<UInt8>, _ range: Range<Int>) -> Bool {
        HeaderName.matches(bytes, range, tokenHeaderName)
    }
}

/// The headers the gateway adds to a forwarded request from a token (claim headers, then the
/// payload header), with the bytes they are written as (`Name: value\r\n` each): made once per
/// cached token, written with one copy per request.
struct InjectedHeaders: Sendable {
    let fields: [(name: String, value: String)]
    let bytes: [UInt8]

    /// None: `auth: none` routes.
    static let none = InjectedHeaders([])

    init(_ fields: [(name: String, value: String)]) {
        self.fields = fields
        var bytes: [UInt8] = []
        for field in fields {
            bytes += field.name.utf8
            bytes += ": ".utf8
            bytes += field.value.utf8
            bytes += [0x0D, 0x0A]
        }
        self.bytes = bytes
    }
}

/// The client side of the hop, as far as forwarding headers are concerned.
struct ClientHop: Sendable {
    /// The TCP peer's address.
    let peerAddress: String
    /// The peer is in `server.trusted_proxies`: its `X-Forwarded-*` are believed and extended.
    let peerTrusted: Bool
    let requestID: RequestIdentifier
    /// `X-Forwarded-Proto` when the peer is not trusted to tell.
    var scheme = "http"
    /// An absolute-form target's authority, in the inbound head's storage: the host the client
    /// asked for, which stands before its `Host` field (RFC 9112 section 3.2.2).
    var targetAuthority: Range<Int>?
}

/// Builds the request header section sent upstream and the response's sent to the client,
/// straight into the outgoing head's bytes: fields are classified by their interned names
/// and copied as byte ranges, so no field becomes a `String`.
///
/// Pure functions of their inputs; the table-driven tests in `ProxyHeaderTests` pin them down.
enum ForwardHeaders {
    /// Writes the fields forwarded upstream, in the client's order, then the gateway's own.
    ///
    /// Removed: hop-by-hop fields (RFC 9110 section 7.6.1: `Connection` and every field it
    /// names, `Keep-Alive`, `Proxy-Connection`, `TE`, `Trailer`, `Transfer-Encoding`,
    /// `Upgrade`), the framing and expectation fields the pool writes for itself
    /// (`Content-Length`, `Expect`), `Proxy` and every `Proxy-*` field (`isProxyField`); every
    /// spoofable name (`ForwardHeaderPolicy.isSpoofable`); the token header unless the tenant
    /// forwards it; `Host`, `X-Forwarded-*`, `Forwarded` and `X-Request-ID`, which
    /// the gateway sets (lookalikes with `_` included); and every other field the gateway acts
    /// on (`HTTPFieldName`) spelt with `_` (`Transfer_Encoding`, `Content_Length`, `Keep_Alive`,
    /// `Proxy_Authorization`, `Content_Type`, …).
    /// Added, replacing and never appending: `Host`, `X-Forwarded-For` (the client's chain
    /// extended with the peer when the peer is trusted, else the peer alone),
    /// `X-Forwarded-Proto`, `X-Forwarded-Host` (a trusted peer's, else the authority of an
    /// absolute-form target, else the client's `Host`), `X-Request-ID`, then `injected` (claim
    /// headers and the payload header; empty on `auth: none` routes).
    static func request(_ inbound: HTTPFields, policy: ForwardHeaderPolicy, hop: ClientHop,
                        injected: InjectedHeaders, into writer: inout HTTPHeadWriter) {
        let bytes = inbound.storage.span
        let options = connectionOptions(inbound)
        var forwardedFor: [HTTPField] = []
        var forwardedProto: HTTPField?
        var forwardedHost: HTTPField?
        var forwarded: [HTTPField] = []
        var host: HTTPField?
        for field in inbound {
            let name = field.nameRange
            if policy.isSpoofable(bytes, name) { continue }
            if policy.isTokenHeader(bytes, name) {
                if policy.forwardsTokenHeader && !isListed(field, options, inbound) { writer.appendField(field, of: inbound) }
                continue
            }
            switch field.lookalike {
            case .host:
                if field.name == .host, host == nil { host = field }
                continue
            case .xForwardedFor:
                if field.name == .xForwardedFor { forwardedFor.append(field) }
                continue
            case .xForwardedProto:
                if field.name == .xForwardedProto, forwardedProto == nil { forwardedProto = field }
                continue
            case .xForwardedHost:
                if field.name == .xForwardedHost, forwardedHost == nil { forwardedHost = field }
                continue
            case .forwarded:
                if field.name == .forwarded { forwarded.append(field) }
                continue
            case .xRequestID:
                continue
            case .other:
                break
            default:
                // A field the gateway acts on spelt with `_` (`Transfer_Encoding`): an upstream
                // reading `_` as `-` would take it for a second one of the gateway's own.
                if field.name != field.lookalike { continue }
            }
            if field.name.isHopControl || isProxyField(field, inbound) || isListed(field, options, inbound) { continue }
            writer.appendField(field, of: inbound)
        }
        writer.appendField(.host, policy.upstreamHost)
        writer.appendFieldName(.xForwardedFor)
        if hop.peerTrusted, !(forwardedFor.isEmpty || (forwardedFor.count == 1 && forwardedFor[0].valueRange.isEmpty)) {
            for field in forwardedFor {
                writer.append(inbound.storage[field.valueRange])
                writer.append(", ")
            }
        }
        writer.append(hop.peerAddress)
        writer.appendCRLF()
        if hop.peerTrusted {
            for field in forwarded { writer.appendField(field, of: inbound) }
        }
        writer.appendFieldName(.xForwardedProto)
        if hop.peerTrusted, let forwardedProto {
            writer.append(inbound.storage[forwardedProto.valueRange])
        } else {
            writer.append(hop.scheme)
        }
        writer.appendCRLF()
        if let value = (hop.peerTrusted ? forwardedHost?.valueRange : nil) ?? hop.targetAuthority ?? host?.valueRange,
           !value.isEmpty { // an empty Host (a target without an authority) names no host
            writer.appendFieldName(.xForwardedHost)
            writer.append(inbound.storage[value])
            writer.appendCRLF()
        }
        appendRequestID(hop.requestID, into: &writer)
        writer.append(injected.bytes)
    }

    /// `X-Request-ID: <id>`, the id's bytes copied in.
    private static func appendRequestID(_ id: RequestIdentifier, into writer: inout HTTPHeadWriter) {
        writer.appendFieldName(.xRequestID)
        id.write(to: &writer)
        writer.appendCRLF()
    }

    /// Writes an upstream response's fields for the client: hop-by-hop fields and the framing
    /// fields go (the server writes its own framing), the fields `Connection` lists go,
    /// `Proxy` and `Proxy-*` go, `X-Request-ID` becomes the gateway's, the `api` decision's
    /// `X-RateLimit-*` (`rateLimit`) and `extra` replace any of those names the upstream sent.
    static func response(_ head: HTTPResponseHead, requestID: RequestIdentifier, extra: HTTPHeaders,
                         rateLimit: TokenBucket.Decision? = nil, into writer: inout HTTPHeadWriter) {
        let fields = head.headers
        let options = connectionOptions(fields)
        for field in fields {
            if field.name.isHopControl || isProxyField(field, fields) || field.name == .xRequestID
                || isListed(field, options, fields) {
                continue
            }
            if rateLimit != nil, isRateLimitField(field, fields) { continue }
            if !extra.fields.isEmpty, extra.containsName(field.nameRange, of: fields) { continue }
            writer.appendField(field, of: fields)
        }
        appendRequestID(requestID, into: &writer)
        if let rateLimit { RateLimitOutcome.appendHeaders(rateLimit, to: &writer) }
        // By index: the fields are borrowed where a `for in` would copy (retain) each pair.
        for index in extra.fields.indices { writer.appendField(extra.fields[index].name, extra.fields[index].value) }
    }

    private static let rateLimitNames = ["x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset"].map { Array($0.utf8) }

    /// An upstream's own `X-RateLimit-Limit`, `-Remaining` or `-Reset` (any case): replaced by
    /// the gateway's when it counted the request.
    private static func isRateLimitField(_ field: HTTPField, _ fields: HTTPFields) -> Bool {
        let count = field.nameRange.count
        guard count == 17 || count == 21 else { return false }
        for name in rateLimitNames where fields.equalsIgnoringCase(field.nameRange, name) { return true }
        return false
    }

    /// `Proxy` and every `Proxy-*` field, either way: credentials and options meant for a proxy
    /// hop (`Proxy-Authorization`, `Proxy-Authenticate`, `Proxy-Connection`), and `Proxy`, which
    /// CGI-style upstreams turn into `HTTP_PROXY`, their own outbound proxy ("httpoxy"). Two
    /// byte tests decide for almost every other name.
    static func isProxyField(_ field: HTTPField, _ fields: HTTPFields) -> Bool {
        let name = field.nameRange
        guard name.count >= 5, name.count == 5 || fields.storage[name.lowerBound + 5] == UInt8(ascii: "-") else { return false }
        return fields.equalsIgnoringCase(name.lowerBound..<(name.lowerBound + 5), "proxy" as StaticString)
    }

    /// The ranges of the field names listed in `Connection` (connection options); no
    /// allocation when there is no `Connection` field, or when it lists only `keep-alive`
    /// (every upstream's `Connection: keep-alive`: the `Keep-Alive` field it names is
    /// hop-by-hop and dropped anyway).
    private static func connectionOptions(_ fields: HTTPFields) -> [Range<Int>] {
        var options: [Range<Int>] = []
        for field in fields where field.name == .connection {
            // An upstream's usual `Connection: keep-alive` whole, without walking it as a list
            // (~450 instructions per proxied response).
            if fields.equalsIgnoringCase(field.valueRange, keepAliveOption) { continue }
            fields.forEachListElement(of: field) { option in
                if !fields.equalsIgnoringCase(option, keepAliveOption) { options.append(option) }
            }
        }
        return options
    }

    private static var keepAliveOption: StaticString { "keep-alive" }

    private static func isListed(_ field: HTTPField, _ options: [Range<Int>], _ fields: HTTPFields) -> Bool {
        guard !options.isEmpty else { return false }
        let storage = fields.storage
        let name = field.nameRange
        return options.contains { option in
            option.count == name.count && zip(storage[option], storage[name]).allSatisfy { lowercase($0) == lowercase($1) }
        }
    }

    private static func lowercase(_ byte: UInt8) -> UInt8 {
        byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte | 0x20 : byte
    }
}
