import AGYAML

extension TenantConfig {
    static let platformSSOKeys = ["path_prefix", "client_id", "audience", "issuer", "id_token_ttl", "refresh_token_ttl",
                                  "refresh_token_idle", "reuse_grace", "nonce_ttl", "nonce_claim_name", "clock_skew"]

    /// Claims of a refresh request that the server nonce claim cannot be named like.
    static let refreshRequestClaims: Set<String> = ["client_id", "iss", "aud", "iat", "exp", "nbf", "scope", "nonce",
                                                    "grant_type", "refresh_token", "jwe_crypto", "sub"]

    /// `platform_sso:` (DESIGN section 11). Problems across tenant files (a prefix used twice, a
    /// prefix under another tenant's route) are found by `PlatformSSOConfig.problemsAcrossTenants`.
    static func decodePlatformSSO(_ field: ConfigField, routes: [RouteConfig], gateway: GatewayConfig,
                                  _ d: ConfigDecoder) -> PlatformSSOConfig? {
        guard let m = d.mapping(field, allowed: platformSSOKeys) else { return nil }
        let prefixField = m.required("path_prefix")
        let pathPrefix = prefixField.flatMap { decodePlatformSSOPrefix($0, routes: routes, d) }
        let clientIDField = m.required("client_id")
        let clientID = clientIDField.flatMap { d.string($0) }
        let audiences = m.required("audience").flatMap { decodeAudiences($0, d) }
        let issuer = m["issuer"].flatMap { d.string($0) } ?? gateway.tokens.issuer
        let nonceClaim = m["nonce_claim_name"].flatMap { field -> String? in
            guard let name = d.string(field) else { return nil }
            guard name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") }) else {
                d.report(field, "expected a claim name (letters, digits, _), got \(ConfigDecoder.quoted(name))")
                return nil
            }
            guard !refreshRequestClaims.contains(name) else {
                d.report(field, "\(name) is another claim of the refresh request")
                return nil
            }
            return name
        } ?? "request_nonce"
        let minute = Duration.seconds(60)
        let idTokenTTL = m["id_token_ttl"].flatMap { field -> Duration? in
            guard let value = wholeSeconds(field, d) else { return nil }
            guard value > minute * 10 else {
                d.report(field, "must be longer than 10m: a Mac refreshes whenever its id_token expires within 10 minutes")
                return nil
            }
            return value
        } ?? .seconds(8 * 3_600)
        let refreshTokenTTL = m["refresh_token_ttl"].flatMap { wholeSeconds($0, d) } ?? .seconds(14 * 86_400)
        let idleField = m["refresh_token_idle"]
        var refreshTokenIdle = idleField.flatMap { wholeSeconds($0, d) } ?? .seconds(7 * 86_400)
        if refreshTokenIdle > refreshTokenTTL {
            if let idleField {
                d.report(idleField, "must not exceed refresh_token_ttl: it would never apply")
            } else {
                // The default idle time only shortens a family's life when it is the shorter one.
                refreshTokenIdle = refreshTokenTTL
            }
        }
        let reuseGrace = m["reuse_grace"].flatMap { wholeSeconds($0, d, allowZero: true, atMost: (minute * 10, "10m")) } ?? .seconds(30)
        let nonceTTL = m["nonce_ttl"].flatMap { wholeSeconds($0, d, atMost: (minute * 60, "1h")) } ?? .seconds(300)
        let clockSkew = m["clock_skew"].flatMap { wholeSeconds($0, d, allowZero: true, atMost: (minute * 5, "5m")) } ?? .seconds(60)
        guard let pathPrefix, let prefixField, let clientID, let clientIDField, let audiences else { return nil }
        return PlatformSSOConfig(pathPrefix: pathPrefix, pathPrefixLine: prefixField.line, clientID: clientID,
                                 clientIDLine: clientIDField.line, audiences: audiences, issuer: issuer, idTokenTTL: idTokenTTL,
                                 refreshTokenTTL: refreshTokenTTL, refreshTokenIdle: refreshTokenIdle,
                                 reuseGrace: reuseGrace, nonceTTL: nonceTTL, nonceClaimName: nonceClaim,
                                 clockSkew: clockSkew)
    }

    /// A path prefix below `/` with no trailing `/`, outside the gateway's own paths (neither
    /// under nor above one) and outside every route of the same tenant.
    private static func decodePlatformSSOPrefix(_ field: ConfigField, routes: [RouteConfig], _ d: ConfigDecoder) -> String? {
        guard var prefix = decodePathPrefix(field, d) else { return nil }
        while prefix.count > 1, prefix.hasSuffix("/") { prefix.removeLast() }
        guard prefix != "/" else {
            d.report(field, "expected a path below /, e.g. /psso")
            return nil
        }
        if let reserved = reservedPaths.first(where: { PlatformSSOConfig.overlaps($0, prefix) }) {
            d.report(field, "\(ConfigDecoder.quoted(prefix)) contains \(reserved), which the gateway serves itself")
            return nil
        }
        if let route = routes.first(where: { PlatformSSOConfig.overlaps($0.prefix, prefix) }) {
            d.report(field, "\(ConfigDecoder.quoted(prefix)) overlaps the route prefix \(ConfigDecoder.quoted(route.prefix))")
            return nil
        }
        return prefix
    }

    /// `audience`: a non-empty list of distinct absolute http(s) URLs.
    private static func decodeAudiences(_ field: ConfigField, _ d: ConfigDecoder) -> [String]? {
        guard case .sequence = field.node.content else {
            d.report(field, "expected a list of absolute URLs (the token and refresh URLs the Macs are configured with), got \(ConfigDecoder.describe(field.node))")
            return nil
        }
        guard let items = d.sequence(field), !items.isEmpty else {
            d.report(field, "expected at least one absolute URL")
            return nil
        }
        var audiences: [String] = []
        for item in items {
            guard let url = d.string(item) else { continue }
            guard isAbsoluteURL(url) else {
                d.report(item, "expected an absolute URL like https://gateway.example.com/psso/token, got \(ConfigDecoder.quoted(url))")
                continue
            }
            guard !audiences.contains(url) else {
                d.report(item, "duplicate audience \(ConfigDecoder.quoted(url))")
                continue
            }
            audiences.append(url)
        }
        return audiences.count == items.count ? audiences : nil
    }

    /// `http://` or `https://`, a non-empty authority without user part, printable ASCII.
    static func isAbsoluteURL(_ text: String) -> Bool {
        guard text.allSatisfy(\.isVisibleASCII) else { return false }
        let rest: Substring
        if text.hasPrefix("https://") {
            rest = text.dropFirst(8)
        } else if text.hasPrefix("http://") {
            rest = text.dropFirst(7)
        } else {
            return false
        }
        let authority = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        return !authority.isEmpty && !authority.contains("@") && !authority.hasPrefix(":")
    }

    /// A duration in whole seconds, optionally zero and bounded above.
    private static func wholeSeconds(_ field: ConfigField, _ d: ConfigDecoder, allowZero: Bool = false,
                                     atMost maximum: (value: Duration, text: String)? = nil) -> Duration? {
        guard let value = d.duration(field, allowZero: allowZero) else { return nil }
        guard value.components.attoseconds == 0 else {
            d.report(field, "must be whole seconds")
            return nil
        }
        if let maximum, value > maximum.value {
            d.report(field, "must be at most \(maximum.text)")
            return nil
        }
        return value
    }
}

extension PlatformSSOConfig {
    /// Whether two path prefixes share a path, segment-wise: equal once trailing `/` are cut, or
    /// one below the other (`/` is above everything).
    static func overlaps(_ a: String, _ b: String) -> Bool {
        func trimmed(_ text: String) -> Substring {
            var text = Substring(text)
            while text.hasSuffix("/") { text = text.dropLast() }
            return text
        }
        let a = trimmed(a), b = trimmed(b)
        if a.isEmpty || b.isEmpty { return true }
        return a == b || a.hasPrefix(b + "/") || b.hasPrefix(a + "/")
    }

    /// What no single tenant file shows: a `path_prefix` overlapping another tenant's
    /// `path_prefix` or routes (the Macs send no tenant headers: the path alone must decide),
    /// reported at the later file's `path_prefix` line; and a `client_id` that is a tenant's
    /// `token.audience` (its own included), reported at the `client_id` line. An id_token is
    /// signed with the same keys as the access tokens and its `aud` is the `client_id`: only
    /// the audience keeps it off the proxied routes (an independent sweep, stop 32, had a Mac's
    /// id_token accepted there when the two were equal).
    static func problemsAcrossTenants(_ tenants: [TenantConfig]) -> [ConfigProblem] {
        var problems: [ConfigProblem] = []
        let path = ConfigKeyPath.root.key("platform_sso").key("path_prefix").description
        let clientIDPath = ConfigKeyPath.root.key("platform_sso").key("client_id").description
        for (index, tenant) in tenants.enumerated() {
            guard let sso = tenant.platformSSO else { continue }
            if let other = tenants.first(where: { $0.token.audience == sso.clientID }) {
                let whose = other.appID == tenant.appID ? "this tenant's token.audience" : "the token.audience of \(other.sourcePath)"
                problems.append(ConfigProblem(
                    file: tenant.sourcePath, line: sso.clientIDLine, keyPath: clientIDPath,
                    message: "\(ConfigDecoder.quoted(sso.clientID)) is \(whose): id_tokens would pass as access tokens on proxied routes; choose another client_id or token.audience"))
            }
            for other in tenants[..<index] {
                if let otherSSO = other.platformSSO, overlaps(otherSSO.pathPrefix, sso.pathPrefix) {
                    problems.append(ConfigProblem(
                        file: tenant.sourcePath, line: sso.pathPrefixLine, keyPath: path,
                        message: "\(ConfigDecoder.quoted(sso.pathPrefix)) overlaps the path_prefix \(ConfigDecoder.quoted(otherSSO.pathPrefix)) of \(other.sourcePath):\(otherSSO.pathPrefixLine)"))
                }
            }
            for other in tenants where other.appID != tenant.appID {
                if let route = other.routes.first(where: { overlaps($0.prefix, sso.pathPrefix) }) {
                    problems.append(ConfigProblem(
                        file: tenant.sourcePath, line: sso.pathPrefixLine, keyPath: path,
                        message: "\(ConfigDecoder.quoted(sso.pathPrefix)) overlaps the route prefix \(ConfigDecoder.quoted(route.prefix)) of \(other.sourcePath)"))
                }
            }
        }
        return problems
    }
}
