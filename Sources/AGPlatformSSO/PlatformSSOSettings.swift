public import AGCrypto
public import AGFormats

/// A tenant's Platform SSO settings, as far as request verification and response building use
/// them (DESIGN section 11, `platform_sso:`). Times are whole seconds.
public struct PlatformSSOSettings: Sendable, Equatable {
    /// The longest request lifetime (`exp − iat`) a Mac produces: it always sends 300 s.
    public static let maximumRequestLifetime: Int64 = 300

    /// The OpenID `client_id`: a request's `client_id` and `iss` must equal it; the id_token's `aud`.
    public var clientID: String
    /// The absolute URLs a request's `aud` may name, compared without query and fragment.
    public var audiences: [String]
    /// The id_token's `iss`.
    public var issuer: String
    /// The claim that carries the server nonce (`request_nonce` unless the Mac is configured otherwise).
    public var nonceClaimName: String
    /// Tolerance on `iat`, `exp` and `nbf`, and on top of the 300 s request lifetime.
    public var clockSkew: Int64
    /// The id_token's lifetime (`expires_in`).
    public var idTokenLifetime: Int64

    public init(clientID: String, audiences: [String], issuer: String, nonceClaimName: String = "request_nonce",
                clockSkew: Int64 = 60, idTokenLifetime: Int64 = 8 * 3600) {
        self.clientID = clientID
        self.audiences = audiences
        self.issuer = issuer
        self.nonceClaimName = nonceClaimName
        self.clockSkew = clockSkew
        self.idTokenLifetime = idTokenLifetime
    }
}

/// A registered device's two public keys, as the caller's store returns them.
public struct PlatformSSODeviceKeys: Sendable, Equatable {
    /// The key that signs the device's requests (its id is the JWS `kid`).
    public let signingKey: P256.PublicKey
    /// The key responses are encrypted to.
    public let encryptionKey: P256.PublicKey

    public init(signingKey: P256.PublicKey, encryptionKey: P256.PublicKey) {
        self.signingKey = signingKey
        self.encryptionKey = encryptionKey
    }

    /// The device's id: the key id of its signing key.
    public var keyID: PlatformSSOKeyID { PlatformSSOKeyID(of: signingKey) }
}

/// The user a device belongs to: the id_token's `sub` and the extra claims the tenant's IdP
/// registered with the device.
public struct PlatformSSOUser: Sendable, Equatable {
    /// Claims the gateway sets itself in every id_token, and `azp` (OpenID Connect: the party the
    /// token was issued to, which must then be the client id alone, the `aud` — an independent
    /// sweep registered another and got id_tokens a relying party may refuse); registered claims
    /// may not use these names.
    public static let reservedClaimNames: Set<String> = ["iss", "aud", "sub", "iat", "nbf", "exp", "nonce", "azp"]

    public let subject: String
    public let claims: [String: JSONValue]

    /// Refuses an empty `sub` and any claim named like a reserved one, naming the first offender.
    public init(subject: String, claims: [String: JSONValue] = [:]) throws(PlatformSSOUserError) {
        guard !subject.isEmpty else { throw PlatformSSOUserError("sub must not be empty") }
        if let reserved = claims.keys.sorted().first(where: Self.reservedClaimNames.contains) {
            throw PlatformSSOUserError("claim \(reserved) is set by the gateway and cannot be registered")
        }
        self.subject = subject
        self.claims = claims
    }
}

/// Why a device's user could not be registered.
public struct PlatformSSOUserError: Error, Sendable, Equatable, CustomStringConvertible {
    public let reason: String

    public init(_ reason: String) { self.reason = reason }

    public var description: String { reason }
}
