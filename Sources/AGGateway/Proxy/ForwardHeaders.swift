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
    let tokenHeader: String
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
        self.tokenHeader = tokenHeader
        forwardsTokenHeader = forward.forwardAuthorization
        self.upstreamHost = upstreamHost
        injectedNames = (forward.claims.map(\.header) + (forward.payloadHeader.map { [$0] } ?? [])).map(HeaderName.normalized)
        tokenHeaderName = HeaderName.normalized(tokenHeader)
    }

    /// Whether an inbound field could pass for a header the gateway vouches for: any
    /// `x-attest-*` name or a mapped name, with `_` read as `-`, in any case.
    func isSpoofable(_ name: String) -> Bool {
        HeaderName.hasAttestPrefix(name) || injectedNames.contains { HeaderName.matches(name, $0) }
    }

    func isTokenHeader(_ name: String) -> Bool {
        HeaderName.matches(name, tokenHeaderName)
    }
}

/// The client side of the hop, as far as forwarding headers are concerned.
struct ClientHop: Sendable {
    /// The TCP peer's address.
    let peerAddress: String
    /// The peer is in `server.trusted_proxies`: its `X-Forwarded-*` are believed and extended.
    let peerTrusted: Bool
    let requestID: String
    /// `X-Forwarded-Proto` when the peer is not trusted to tell.
    var scheme = "http"
}

/// Builds the request header section sent upstream and filters the response's.
///
/// Pure functions of their inputs; the table-driven tests in `ProxyHeaderTests` pin them down.
enum ForwardHeaders {
    /// The fields forwarded upstream, in the client's order, then the gateway's own.
    ///
    /// Removed: hop-by-hop fields (RFC 9110 section 7.6.1: `Connection` and every field it
    /// names, `Keep-Alive`, `Proxy-Connection`, `TE`, `Trailer`, `Transfer-Encoding`,
    /// `Upgrade`) and `Proxy-Authorization` (credentials meant for this hop); every spoofable
    /// name (`ForwardHeaderPolicy.isSpoofable`); the token header unless the tenant forwards
    /// it; `Host`, `X-Forwarded-*`, `Forwarded` and `X-Request-ID`, which the gateway sets.
    /// Added, replacing and never appending: `Host`, `X-Forwarded-For` (the client's chain
    /// extended with the peer when the peer is trusted, else the peer alone),
    /// `X-Forwarded-Proto`, `X-Forwarded-Host`, `X-Request-ID`, then `injected` (claim
    /// headers and the payload header; empty on `auth: none` routes).
    static func request(_ inbound: HTTPHeaders, policy: ForwardHeaderPolicy, hop: ClientHop,
                        injected: [(name: String, value: String)]) -> HTTPHeaders {
        let connectionTokens = connectionOptions(inbound)
        var fields: [(name: String, value: String)] = []
        fields.reserveCapacity(inbound.count + injected.count + 5)
        var forwardedFor: String?
        var forwardedProto: String?
        var forwardedHost: String?
        var forwarded: [String] = []
        var host: String?
        for field in inbound.fields {
            let name = field.name
            if policy.isSpoofable(name) { continue }
            if policy.isTokenHeader(name) {
                if policy.forwardsTokenHeader && !isListed(name, connectionTokens) { fields.append(field) }
                continue
            }
            if HeaderName.matches(name, Names.host) {
                if name.equalsIgnoringASCIICase("Host"), host == nil { host = field.value }
                continue
            }
            if HeaderName.matches(name, Names.xForwardedFor) {
                if name.equalsIgnoringASCIICase("X-Forwarded-For") {
                    forwardedFor = forwardedFor.map { $0 + ", " + field.value } ?? field.value
                }
                continue
            }
            if HeaderName.matches(name, Names.xForwardedProto) {
                if name.equalsIgnoringASCIICase("X-Forwarded-Proto"), forwardedProto == nil { forwardedProto = field.value }
                continue
            }
            if HeaderName.matches(name, Names.xForwardedHost) {
                if name.equalsIgnoringASCIICase("X-Forwarded-Host"), forwardedHost == nil { forwardedHost = field.value }
                continue
            }
            if HeaderName.matches(name, Names.forwarded) {
                if name.equalsIgnoringASCIICase("Forwarded") { forwarded.append(field.value) }
                continue
            }
            if HeaderName.matches(name, Names.xRequestID) || isHopByHop(name) || isListed(name, connectionTokens) { continue }
            fields.append(field)
        }
        fields.append(("Host", policy.upstreamHost))
        if hop.peerTrusted, let chain = forwardedFor, !chain.isEmpty {
            fields.append(("X-Forwarded-For", chain + ", " + hop.peerAddress))
        } else {
            fields.append(("X-Forwarded-For", hop.peerAddress))
        }
        if hop.peerTrusted {
            for value in forwarded { fields.append(("Forwarded", value)) }
        }
        fields.append(("X-Forwarded-Proto", (hop.peerTrusted ? forwardedProto : nil) ?? hop.scheme))
        if let value = (hop.peerTrusted ? forwardedHost : nil) ?? host {
            fields.append(("X-Forwarded-Host", value))
        }
        fields.append(("X-Request-ID", hop.requestID))
        fields.append(contentsOf: injected)
        return HTTPHeaders(fields)
    }

    /// Edits an upstream response's fields before they reach the client: hop-by-hop fields go
    /// (the pool has already removed the framing ones; it drops `Connection` itself after this
    /// runs, so the options it lists are read here), `Proxy-Authenticate` goes, `X-Request-ID`
    /// becomes the gateway's, and `extra` (rate-limit headers) replace any the upstream sent.
    static func filterResponse(_ headers: inout HTTPHeaders, requestID: String, extra: HTTPHeaders) {
        let connectionTokens = connectionOptions(headers)
        headers.removeAll { name in
            isHopByHop(name) || isListed(name, connectionTokens) || name.equalsIgnoringASCIICase("Proxy-Authenticate")
                || name.equalsIgnoringASCIICase("X-Request-ID")
        }
        headers.add("X-Request-ID", requestID)
        for field in extra.fields { headers.replace(field.name, field.value) }
    }

    /// Hop-by-hop fields by name (RFC 9110 section 7.6.1), plus `Proxy-Authorization`,
    /// which carries credentials for the proxy itself.
    static func isHopByHop(_ name: String) -> Bool {
        switch name.utf8.count {
        case 2: name.equalsIgnoringASCIICase("TE")
        case 7: name.equalsIgnoringASCIICase("Trailer") || name.equalsIgnoringASCIICase("Upgrade")
        case 10: name.equalsIgnoringASCIICase("Connection") || name.equalsIgnoringASCIICase("Keep-Alive")
        case 16: name.equalsIgnoringASCIICase("Proxy-Connection")
        case 17: name.equalsIgnoringASCIICase("Transfer-Encoding")
        case 19: name.equalsIgnoringASCIICase("Proxy-Authorization")
        default: false
        }
    }

    /// The field names listed in `Connection` (connection options), lower-cased.
    private static func connectionOptions(_ headers: HTTPHeaders) -> [Substring] {
        var tokens: [Substring] = []
        for value in headers.values("Connection") {
            for part in value.split(separator: ",") {
                let token = part.drop { $0 == " " || $0 == "\t" }
                let trimmed = token.reversed().drop { $0 == " " || $0 == "\t" }
                if !trimmed.isEmpty { tokens.append(token.prefix(trimmed.count)) }
            }
        }
        return tokens
    }

    private static func isListed(_ name: String, _ tokens: [Substring]) -> Bool {
        !tokens.isEmpty && tokens.contains { $0.equalsIgnoringASCIICase(name) }
    }

    private enum Names {
        static let host = HeaderName.normalized("host")
        static let xForwardedFor = HeaderName.normalized("x-forwarded-for")
        static let xForwardedProto = HeaderName.normalized("x-forwarded-proto")
        static let xForwardedHost = HeaderName.normalized("x-forwarded-host")
        static let forwarded = HeaderName.normalized("forwarded")
        static let xRequestID = HeaderName.normalized("x-request-id")
    }
}
