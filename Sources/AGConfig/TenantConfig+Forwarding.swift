import AGYAML

/// The tenant `forward` section: which claims become which upstream headers, the payload
/// header, and whether the client's `Authorization` is passed on.
extension TenantConfig {
    static func decodeForward(_ m: ConfigMapping?, tokenHeader: String, _ d: ConfigDecoder) -> ForwardConfig {
        var usedHeaders: [String: String] = [normalizedHeader(tokenHeader): "token.header"]
        func forwardableHeader(_ field: ConfigField, _ name: String) -> String? {
            guard isHeaderName(name) else {
                d.report(field, "expected an HTTP header name, got \(ConfigDecoder.quoted(name))")
                return nil
            }
            let normalized = normalizedHeader(name)
            if isManagedHeader(normalized) {
                d.report(field, "\(name) is managed by the proxy and cannot carry claims")
                return nil
            }
            if let user = usedHeaders[normalized] {
                d.report(field, "header \(name) is already used by \(user)")
                return nil
            }
            usedHeaders[normalized] = field.path.description
            return name
        }
        if m?.raw("payload_header") == nil {
            usedHeaders[normalizedHeader(ForwardConfig.defaultPayloadHeader)] = "the default forward.payload_header"
        }
        var claims = ForwardConfig.defaultClaims
        if let claimsField = m?["claims"] {
            claims = decodeClaimHeaders(claimsField, d, forwardableHeader)
        } else {
            for claim in claims {
                usedHeaders[normalizedHeader(claim.header)] = "the default forward.claims." + claim.claimPath.joined(separator: ".")
            }
        }
        var payloadHeader: String? = ForwardConfig.defaultPayloadHeader
        if let payloadField = m?.raw("payload_header") {
            if payloadField.isNull {
                payloadHeader = nil
            } else if case .scalar(let scalar) = payloadField.node.content, scalar.resolved == .bool(false)
                        || (!scalar.isPlain && scalar.text.isEmpty) {
                payloadHeader = nil
            } else if case .scalar(let scalar) = payloadField.node.content, case .string(let name) = scalar.resolved {
                payloadHeader = forwardableHeader(payloadField, name)
            } else {
                d.report(payloadField, "expected a header name, or false to disable, got \(ConfigDecoder.describe(payloadField.node))")
            }
        }
        return ForwardConfig(claims: claims, payloadHeader: payloadHeader,
                             forwardAuthorization: m?["forward_authorization"].flatMap { d.bool($0) } ?? false)
    }

    /// `forward.claims`: claim path → header, in file order; `forwardableHeader` checks and
    /// claims each header name.
    static func decodeClaimHeaders(_ field: ConfigField, _ d: ConfigDecoder,
                                           _ forwardableHeader: (ConfigField, String) -> String?) -> [ClaimHeader] {
        guard let entries = d.entries(field) else { return ForwardConfig.defaultClaims }
        return entries.compactMap { key, headerField in
            let path = key.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
            guard path.allSatisfy({ !$0.isEmpty }), let first = path.first, knownClaims.contains(first),
                  path.count == 1 || first == "custom_claims"
            else {
                d.report(line: headerField.keyLine, path: headerField.path,
                         "unknown claim \(ConfigDecoder.quoted(key)); claims: \(knownClaims.joined(separator: ", ")) (custom_claims.<path> for nested values)")
                return nil
            }
            guard let header = d.string(headerField).flatMap({ forwardableHeader(headerField, $0) }) else {
                return nil
            }
            return ClaimHeader(claimPath: path, header: header)
        }
    }
}
