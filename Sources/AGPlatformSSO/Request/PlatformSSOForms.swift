/// The form of a token or refresh call (`POST {prefix}/token`, `POST {prefix}/refresh`).
///
/// `grant_type` must be the JWT bearer grant; the JWS comes in `assertion` (macOS 14+) or
/// `request` (macOS 13), exactly one of them. `platform_sso_version` is kept but not judged:
/// the JWS `typ` says what the request is. Other fields are ignored.
public struct PlatformSSOTokenForm: Sendable, Equatable {
    /// The only grant type the token endpoint serves.
    public static let grantType = "urn:ietf:params:oauth:grant-type:jwt-bearer"

    /// The compact JWS, unparsed.
    public let jws: String
    /// `platform_sso_version` (`1.0` on current macOS), when sent.
    public let platformSSOVersion: String?

    /// Parses the body. A malformed form or a missing or doubled field is 400
    /// `invalid_request`; any other `grant_type` is 400 `unsupported_grant_type`.
    public init(body: some Collection<UInt8>) throws(OAuthError) {
        let form: URLEncodedForm
        do {
            form = try URLEncodedForm(parsing: body)
        } catch {
            throw .invalidRequest("malformed form: \(error.reason)")
        }
        try self.init(form: form)
    }

    public init(form: URLEncodedForm) throws(OAuthError) {
        guard let grantType = form["grant_type"] else { throw .invalidRequest("grant_type is missing") }
        guard grantType == Self.grantType else { throw .unsupportedGrantType("grant_type must be \(Self.grantType)") }
        switch (form["assertion"], form["request"]) {
        case (let jws?, nil), (nil, let jws?):
            guard !jws.isEmpty else { throw .invalidRequest("the JWS is empty") }
            self.jws = jws
        case (nil, nil):
            throw .invalidRequest("assertion is missing")
        case (.some, .some):
            throw .invalidRequest("send the JWS in assertion or request, not both")
        }
        platformSSOVersion = form["platform_sso_version"]
    }
}

/// The form of a server nonce call (`POST {prefix}/nonce`): `grant_type=srv_challenge`,
/// other fields (a Mac's custom values) ignored.
public struct PlatformSSONonceForm: Sendable, Equatable {
    /// The grant type of the nonce call.
    public static let grantType = "srv_challenge"

    /// Parses the body: malformed or without `grant_type` is 400 `invalid_request`, another
    /// `grant_type` 400 `unsupported_grant_type`.
    public init(body: some Collection<UInt8>) throws(OAuthError) {
        let form: URLEncodedForm
        do {
            form = try URLEncodedForm(parsing: body)
        } catch {
            throw .invalidRequest("malformed form: \(error.reason)")
        }
        guard let grantType = form["grant_type"] else { throw .invalidRequest("grant_type is missing") }
        guard grantType == Self.grantType else { throw .unsupportedGrantType("grant_type must be \(Self.grantType)") }
    }
}
