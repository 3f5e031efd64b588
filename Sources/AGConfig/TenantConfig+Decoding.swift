import AGYAML
import AGAppAttest
import AGFormats
extension TenantConfig {
    enum Keys {
        static let root = ["team_id", "bundle_id", "tier", "environment", "token", "custom_claims", "upstream",
                           "upstream_ca", "routes", "forward", "platform_sso"]
        static let token = ["audience", "ttl", "header"]
        static let route = ["prefix", "auth"]
        static let forward = ["claims", "payload_header", "forward_authorization"]
    }

    /// Paths the gateway answers itself; routes may not claim them or anything under them.
    public static let reservedPaths = ["/api/v1/attestation", "/.well-known", "/healthz", "/readyz"]

    /// Claims a token can carry (section 4 of the design); `custom_claims` may be followed by any path.
    public static let knownClaims = ["iss", "aud", "sub", "iat", "nbf", "exp", "jti", "team_id", "bundle_id", "subject_id",
                              "custom_claims"]

    /// Headers the proxy manages itself, or the gateway and HTTP read for something else (the
    /// tenant selectors, `Expect`), which a claim or the payload may not be forwarded in; and
    /// every `Proxy-*` field, removed both ways, and every `X-Forwarded-*` one, which upstream
    /// frameworks read to rebuild the request's URL (`-Port`, `-Prefix`) (`isManagedHeader`).
    static let managedHeaders: Set<String> = [
        "authorization", "connection", "content-length", "content-type", "cookie", "expect", "forwarded", "host",
        "keep-alive", "proxy", "te", "trailer", "transfer-encoding", "upgrade", "x-bundle-id", "x-forwarded-for",
        "x-forwarded-host", "x-forwarded-proto", "x-request-id", "x-team-id",
    ]

    /// Whether `normalized` (lower case, `_` read as `-`) is a managed header.
    static func isManagedHeader(_ normalized: String) -> Bool {
        managedHeaders.contains(normalized) || normalized.hasPrefix("proxy-") || normalized.hasPrefix("x-forwarded-")
    }

    /// Decodes one tenant file against the gateway it will run in (tiers, token defaults, test CA).
    /// Returns the tenant and the line naming its App ID (for duplicate reports), or `nil` when
    /// the App ID itself is unusable.
    public static func decode(_ root: YAMLNode?, sourcePath: String, gateway: GatewayConfig,
                       decoder d: ConfigDecoder) -> (tenant: TenantConfig, appIDLine: Int)? {
        let top = d.rootMapping(root, allowed: Keys.root)
        let teamID = top.required("team_id").flatMap { field -> String? in
            guard let text = d.string(field) else { return nil }
            guard text.count == 10, text.allSatisfy({ $0.isASCII && ($0.isUppercase || $0.isNumber) }) else {
                d.report(field, "expected 10 uppercase letters or digits (an Apple team ID), got \(ConfigDecoder.quoted(text))")
                return nil
            }
            return text
        }
        let bundleID = top.required("bundle_id").flatMap { field -> String? in
            guard let text = d.string(field) else { return nil }
            guard isBundleID(text) else {
                d.report(field, "expected a reverse-DNS bundle ID like com.example.app (letters, digits, - in dot-separated parts), got \(ConfigDecoder.quoted(text))")
                return nil
            }
            return text
        }
        let tier = top["tier"].flatMap { field -> String? in
            guard let name = d.string(field) else { return nil }
            guard gateway.tiers[name] != nil else {
                d.report(field, "unknown tier \(ConfigDecoder.quoted(name)); defined tiers: \(gateway.tiers.keys.sorted().joined(separator: ", "))")
                return nil
            }
            return name
        } ?? "free"
        let environmentField = top["environment"]
        let statedEnvironment = environmentField.flatMap { d.oneOf($0, AppAttestEnvironment.self) }
        let environment = statedEnvironment ?? .production
        // A value refused above (and so read as production) says nothing of the test CA.
        let environmentRefused = environmentField != nil && statedEnvironment == nil
        if environment == .production, !environmentRefused, gateway.appAttest.testCAFile != nil, !gateway.appAttest.allowTestCA {
            d.report(line: environmentField?.line ?? top.line, path: ConfigKeyPath.root.key("environment"),
                     "a production tenant cannot trust the test CA (app_attest.test_ca); use environment: development or set app_attest.allow_test_ca: true")
        }
        let appID = "\(teamID ?? "").\(bundleID ?? "")"
        let tokenSection = top["token"].flatMap { d.mapping($0, allowed: Keys.token) }
        let token = decodeToken(tokenSection, appID: appID, gateway: gateway, d)
        let customClaims = top["custom_claims"].flatMap { decodeCustomClaims($0, d) } ?? [:]
        let routesField = top["routes"]
        let routes = routesField.flatMap { decodeRoutes($0, d) } ?? []
        var upstream: UpstreamURL?
        if let upstreamField = top["upstream"] {
            upstream = decodeUpstream(upstreamField, d)
        } else if !routes.isEmpty {
            d.report(line: top.line, path: ConfigKeyPath.root.key("upstream"), "missing required key (routes are proxied to it)")
        }
        let upstreamCA = top["upstream_ca"].flatMap { decodeUpstreamCA($0, upstream: upstream, sourcePath: sourcePath, d) }
        let forwardSection = top["forward"].flatMap { d.mapping($0, allowed: Keys.forward) }
        let forward = decodeForward(forwardSection, tokenHeader: token.header, d)
        if !hasRoutes(routesField) {
            refuseProxyKeysWithoutRoutes([top["upstream"], top["upstream_ca"], tokenSection?["header"],
                                          forwardSection?["claims"], forwardSection?.raw("payload_header"),
                                          forwardSection?["forward_authorization"]], d)
        }
        let platformSSO = top["platform_sso"].flatMap { decodePlatformSSO($0, routes: routes, gateway: gateway, d) }
        guard let teamID, let bundleID else { return nil }
        let tenant = TenantConfig(name: ConfigFiles.stem(of: sourcePath), sourcePath: sourcePath, teamID: teamID,
                                  bundleID: bundleID, appID: appID, tier: tier, environment: environment,
                                  token: token, customClaims: customClaims, upstream: upstream, upstreamCA: upstreamCA,
                                  routes: routes,
                                  forward: forward, platformSSO: platformSSO)
        return (tenant, top.raw("bundle_id")?.line ?? top.line)
    }

    /// Dot-separated parts of ASCII letters, digits and `-`, at least two parts, at most 155 characters.
    public static func isBundleID(_ text: String) -> Bool {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        return text.count <= 155 && parts.count >= 2 && parts.allSatisfy { part in
            !part.isEmpty && part.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-") }
        }
    }

    /// An RFC 9110 field name: one or more token characters.
    public static func isHeaderName(_ text: String) -> Bool {
        !text.isEmpty && text.allSatisfy { character in
            character.isASCII && (character.isLetter || character.isNumber || "!#$%&'*+-.^_`|~".contains(character))
        }
    }

    /// Header names compare as the anti-spoofing filter sees them: lower-cased, `_` read as `-`.
    public static func normalizedHeader(_ name: String) -> String {
        String(name.lowercased().map { $0 == "_" ? "-" : $0 })
    }

    /// Whether `routes` lists at least one route; one that is not a list counts as having them,
    /// as it was reported already.
    private static func hasRoutes(_ routes: ConfigField?) -> Bool {
        guard let routes else { return false }
        if case .sequence(let items) = routes.node.content { return !items.isEmpty }
        return true
    }

    /// `upstream`, `upstream_ca`, `token.header` and `forward.*` are read only by the proxy,
    /// which a tenant has only with routes (`TenantProxy` in AGGateway); without routes they
    /// would be accepted and do nothing. `forward.payload_header` counts even when null, which
    /// turns the header off.
    private static func refuseProxyKeysWithoutRoutes(_ fields: [ConfigField?], _ d: ConfigDecoder) {
        for field in fields.compactMap({ $0 }) {
            d.report(line: field.keyLine, path: field.path, "has no effect without routes; add routes or remove it")
        }
    }

    private static func decodeToken(_ m: ConfigMapping?, appID: String, gateway: GatewayConfig,
                                     _ d: ConfigDecoder) -> TenantTokenConfig {
        let header = m?["header"].flatMap { field -> String? in
            guard let name = d.string(field) else { return nil }
            guard isHeaderName(name) else {
                d.report(field, "expected an HTTP header name, got \(ConfigDecoder.quoted(name))")
                return nil
            }
            let normalized = normalizedHeader(name)
            if normalized.hasPrefix("x-attest-") {
                d.report(field, "X-Attest-* headers are removed from every request before forwarding; choose another header")
                return nil
            }
            // A header the gateway reads for something else: the tenant could never be reached
            // with a token there (an independent sweep, stop 32, found X-Team-ID accepted).
            // `Proxy` and `Forwarded` too: the proxy removes them (`Forwarded` unless from a
            // trusted peer), and a token header is passed on as it came with forward_authorization.
            let taken = ["x-team-id", "x-bundle-id", "host", "connection", "keep-alive", "te", "trailer", "transfer-encoding",
                         "upgrade", "content-length", "content-type", "expect", "cookie", "x-forwarded-for",
                         "x-forwarded-host", "x-forwarded-proto", "x-request-id", "forwarded", "proxy"]
            // Any `X-Forwarded-*` too, as the README has always said (an independent sweep of its
            // claims, stop 36, found `X-Forwarded-Port` and `-Prefix` accepted).
            if taken.contains(normalized) || normalized.hasPrefix("proxy-") || normalized.hasPrefix("x-forwarded-") {
                d.report(field, "\(name) is a header the gateway or HTTP itself reads for something else; choose another header")
                return nil
            }
            return name
        }
        return TenantTokenConfig(audience: m?["audience"].flatMap { d.string($0) } ?? appID,
                                 ttl: m?["ttl"].flatMap { d.duration($0) } ?? gateway.tokens.ttl,
                                 header: header ?? "Authorization")
    }

    private static func decodeCustomClaims(_ field: ConfigField, _ d: ConfigDecoder) -> [String: JSONValue]? {
        guard let entries = d.entries(field) else { return nil }
        var claims: [String: JSONValue] = [:]
        for (key, valueField) in entries {
            if key == "subscription" {
                d.report(line: valueField.keyLine, path: valueField.path,
                         "reserved: the subscription claim is set per subject through the admin API")
                continue
            }
            if let value = claimValue(valueField, d) { claims[key] = value }
        }
        return claims
    }

    /// A claim's value, or a member or element of one. Null is refused: tokens omit claims
    /// without a value and never carry null, so the key would have no effect.
    private static func claimValue(_ field: ConfigField, _ d: ConfigDecoder) -> JSONValue? {
        if case .scalar(let scalar) = field.node.content, case .null = scalar.resolved {
            d.report(field, "null is not a claim value (tokens omit claims without one, never send null): remove it or give it a value")
            return nil
        }
        return jsonValue(field, d)
    }

    /// Any YAML value as JSON: plain scalars typed by the core schema, quoted ones as strings.
    private static func jsonValue(_ field: ConfigField, _ d: ConfigDecoder) -> JSONValue? {
        switch field.node.content {
        case .scalar(let scalar):
            switch scalar.resolved {
            case .null: return .null
            case .bool(let value): return .bool(value)
            case .int(let value): return .integer(Int64(value))
            case .string(let value):
                // The core schema's integer past Int64 (it stays a string so that this can be
                // said): sending it as a string would change the claim's type unasked.
                guard !scalar.isPlain || !YAMLScalar.isDecimalInteger(value) else {
                    d.report(field, "integer out of range (a 64-bit integer: -9223372036854775808 to 9223372036854775807); quote it to send a string")
                    return nil
                }
                return .string(value)
            case .double(let value):
                guard value.isFinite else {
                    d.report(field, "JSON has no infinity or NaN; quote it to send a string")
                    return nil
                }
                return .double(value)
            }
        case .sequence:
            let items = d.sequence(field) ?? []
            let values = items.compactMap { claimValue($0, d) }
            return values.count == items.count ? .array(values) : nil
        case .mapping:
            let entries = d.entries(field) ?? []
            var members: [String: JSONValue] = [:]
            for (key, valueField) in entries {
                if let value = claimValue(valueField, d) { members[key] = value }
            }
            return members.count == entries.count ? .object(members) : nil
        }
    }

    private static func decodeUpstream(_ field: ConfigField, _ d: ConfigDecoder) -> UpstreamURL? {
        guard let text = d.string(field) else { return nil }
        switch UpstreamURL.parse(text) {
        case .success(let url):
            return url
        case .failure(.credentials):
            d.report(field, "an upstream URL may not hold @ (credentials, user:password@, are not accepted, and the URL is not repeated here); expected http:// or https:// then host[:port][/base path]")
        case .failure(let error):
            // Not repeated either: a password may sit where a host or port is expected
            // (`http://u:pw%40host`), or in a query (an independent sweep, stop 36).
            d.report(field, "expected http:// or https:// then host[:port][/base path] (host: an IP address or a DNS name): \(error.reason) (the URL is not repeated here)")
        }
        return nil
    }

    /// `upstream_ca`: a readable file, relative to the tenant file, only beside an https upstream
    /// (a CA for a plain-HTTP upstream would have no effect).
    private static func decodeUpstreamCA(_ field: ConfigField, upstream: UpstreamURL?, sourcePath: String,
                                         _ d: ConfigDecoder) -> UpstreamCAFile? {
        guard let text = d.string(field) else { return nil }
        let path = ConfigFiles.resolve(text, against: ConfigFiles.directory(of: sourcePath))
        if let reason = ConfigFiles.unreadableReason(path) {
            d.report(field, "CA file \(ConfigDecoder.quoted(path)) \(reason)")
            return nil
        }
        if let upstream, !upstream.isTLS {
            d.report(field, "upstream_ca applies to https:// upstreams only; \(ConfigDecoder.quoted(upstream.description)) is plain http")
            return nil
        }
        return UpstreamCAFile(path: path, location: d.location(of: field))
    }

    /// Why no request path could ever match `prefix`, or nil. Requests are matched on their
    /// normalized path (`ProxyPath` in AGPolicy): one `/` between segments, unreserved
    /// characters unescaped, other escapes in upper case; a path with an encoded `/`, `\` or
    /// NUL, a backslash, or a `.`/`..` segment before a `;` is refused. A prefix written any
    /// other way would be accepted and never used.
    static func unmatchableReason(_ prefix: String) -> String? {
        if prefix.contains("//") { return "it has an empty segment (//), and request paths are matched with one / between segments" }
        if prefix.contains("\\") { return "a request path holding a backslash is refused" }
        let bytes = Array(prefix.utf8)
        var index = 0
        while index < bytes.count {
            guard bytes[index] == UInt8(ascii: "%") else {
                index += 1
                continue
            }
            guard index + 2 < bytes.count, let high = PercentEncoding.hexValue(bytes[index + 1]), let low = PercentEncoding.hexValue(bytes[index + 2]) else {
                return "% must be followed by two hex digits"
            }
            let value = high << 4 | low
            if value == 0x2F || value == 0x5C || value == 0 { return "a request path holding an encoded /, \\ or NUL is refused" }
            if PercentEncoding.isUnreserved(value) {
                return "request paths are matched with unreserved characters unescaped (write \(Character(Unicode.Scalar(value))))"
            }
            if bytes[index + 1] >= UInt8(ascii: "a") || bytes[index + 2] >= UInt8(ascii: "a") {
                return "request paths are matched with escapes in upper case"
            }
            index += 3
        }
        if prefix.split(separator: "/").contains(where: { $0.split(separator: ";", omittingEmptySubsequences: false).first.map { $0 == "." || $0 == ".." } ?? false }) {
            return "a request path with a . or .. segment before a ; is refused"
        }
        return nil
    }

    /// A path prefix: starts with `/`, no whitespace, query or fragment, outside the gateway's own paths.
    static func decodePathPrefix(_ field: ConfigField, _ d: ConfigDecoder) -> String? {
        guard let prefix = d.string(field) else { return nil }
        guard prefix.hasPrefix("/"),
              prefix.allSatisfy(\.isVisibleASCII),
              !prefix.contains("?"), !prefix.contains("#"),
              !prefix.split(separator: "/").contains(where: { $0 == "." || $0 == ".." })
        else {
            d.report(field, "expected a path prefix starting with / (printable ASCII, no query, fragment, . or .. segments), got \(ConfigDecoder.quoted(prefix))")
            return nil
        }
        if let reason = unmatchableReason(prefix) {
            d.report(field, "no request can match \(ConfigDecoder.quoted(prefix)): \(reason)")
            return nil
        }
        var trimmed = Substring(prefix)
        while trimmed.count > 1, trimmed.hasSuffix("/") { trimmed = trimmed.dropLast() }
        if let reserved = reservedPaths.first(where: { trimmed == $0 || trimmed.hasPrefix($0 + "/") }) {
            d.report(field, "\(ConfigDecoder.quoted(prefix)) is under \(reserved), which the gateway serves itself")
            return nil
        }
        return prefix
    }

    private static func decodeRoutes(_ field: ConfigField, _ d: ConfigDecoder) -> [RouteConfig]? {
        guard let items = d.sequence(field) else { return nil }
        var routes: [RouteConfig] = []
        var prefixIndex: [String: Int] = [:]
        for (index, item) in items.enumerated() {
            guard let m = d.mapping(item, allowed: Keys.route) else { continue }
            let prefix = m.required("prefix").flatMap { field -> String? in
                guard let prefix = decodePathPrefix(field, d) else { return nil }
                if let first = prefixIndex[prefix] {
                    d.report(field, "duplicate route prefix \(ConfigDecoder.quoted(prefix)) (also routes[\(first)])")
                    return nil
                }
                prefixIndex[prefix] = index
                return prefix
            }
            let auth = m["auth"].flatMap { d.oneOf($0, RouteAuth.self) } ?? .required
            if let prefix { routes.append(RouteConfig(prefix: prefix, auth: auth)) }
        }
        return routes
    }
}
