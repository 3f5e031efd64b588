import AGCrypto
import AGHTTP
public import AGFormats
import AGJOSE
import AGPlatformSSO
import Foundation

/// Where a simulated Mac's Platform SSO extension is pointed: the tenant's endpoints below
/// `prefix` on the gateway, the client id and the token URL it is configured with, and the
/// issuer it expects in id_tokens.
public struct MacConfiguration: Sendable {
    public var session: DeviceSessionConfiguration
    /// The tenant's `platform_sso.path_prefix`.
    public var prefix: String
    public var clientID: String
    /// The token endpoint URL as configured on the Mac: the request's `aud`.
    public var audience: String
    /// The id_token `iss` the Mac accepts.
    public var issuer: String
    public var nonceClaimName: String

    public init(session: DeviceSessionConfiguration, prefix: String, clientID: String, audience: String, issuer: String,
                nonceClaimName: String = "request_nonce") {
        self.session = session
        self.prefix = prefix
        self.clientID = clientID
        self.audience = audience
        self.issuer = issuer
        self.nonceClaimName = nonceClaimName
    }
}

/// One completed refresh: what was sent (without secrets) and what came back, checked.
public struct MacRefresh: Sendable {
    public let request: MacRefreshRequest
    public let response: MacLoginResponse
    /// The `client-request-id` sent on both calls and echoed by the gateway.
    public let clientRequestID: String
}

/// Plays a Mac against the gateway: registration through the admin API (the tenant IdP's part),
/// server nonce, refresh request, and the checks a Mac makes on the encrypted answer.
///
/// Blocking and not thread-safe. With a `statePath` the Mac is saved whenever its refresh token
/// changes, so later runs continue with the token the gateway expects.
public final class MacSession {
    public let configuration: MacConfiguration
    public private(set) var mac: SimulatedMac
    public let statePath: String?
    private let gateway: BlockingHTTPClient
    private var admin: BlockingHTTPClient?
    /// The gateway's JWKS as last fetched: a Mac keeps it and fetches again when an id_token
    /// does not verify with it (a kid it has not seen).
    var jwksCache: JSONValue?

    public convenience init(configuration: MacConfiguration, mac: SimulatedMac, statePath: String? = nil) {
        self.init(configuration: configuration, mac: mac, statePath: statePath,
                  gatewayClient: BlockingHTTPClient(endpoint: configuration.session.gateway, timeout: configuration.session.timeout),
                  adminClient: nil)
    }

    /// A session sending through clients that sessions on the same thread may share.
    init(configuration: MacConfiguration, mac: SimulatedMac, statePath: String?, gatewayClient: BlockingHTTPClient,
         adminClient: BlockingHTTPClient?) {
        self.configuration = configuration
        self.mac = mac
        self.statePath = statePath
        gateway = gatewayClient
        admin = adminClient
    }

    private var devicePath: String { "/admin/v1/tenants/\(mac.appID)/psso/devices/\(mac.keyID.urlSafe)" }

    /// What the tenant's IdP does after a login: registers the device (`PUT`, signing key as SPKI
    /// PEM, encryption key as JWK) with the user and `claims`, then mints a first refresh token
    /// (a new family), which the Mac keeps. Returns the registration's status and the token's
    /// lifetime in seconds.
    @discardableResult
    public func register(claims: [String: JSONValue] = [:]) throws(DeviceError) -> (status: Int, expiresIn: Int64) {
        let body = JSONValue.object([
            "signingKey": .string(mac.signingKey.publicKey.pemRepresentation),
            "encryptionKey": mac.encryptionKey.publicKey.jwk,
            "user": ["sub": .string(mac.subject), "claims": .object(claims)],
        ])
        let registered = try adminRequest("PUT", devicePath, body: body.serialized())
        let minted = try adminRequest("POST", devicePath + "/refresh-tokens", body: nil)
        guard let document = try? JSONValue(parsing: minted.body), let token = document["refresh_token"]?.stringValue,
              let expiresIn = document["expires_in"]?.integerValue else {
            throw .unexpectedResponse(status: minted.status, reason: "no refresh_token and expires_in")
        }
        mac.refreshToken = token
        try save()
        return (registered.status, expiresIn)
    }

    /// `POST {prefix}/nonce` with `grant_type=srv_challenge`; the `Nonce` of the answer.
    public func nonce(clientRequestID: String) throws(DeviceError) -> String {
        let request = nonceRequest(clientRequestID: clientRequestID)
        return try Self.nonce(answering: send(request), to: request)
    }

    /// The nonce request, for a caller that sends it itself (the load generator).
    func nonceRequest(clientRequestID: String) -> SessionRequest {
        Self.form(configuration.prefix + "/nonce", body: "grant_type=srv_challenge",
                  headers: [("client-request-id", clientRequestID), ("Accept", "application/json")])
    }

    /// The `Nonce` in the answer to a `nonceRequest`.
    static func nonce(answering response: HTTPClientResponse, to request: SessionRequest) throws(DeviceError) -> String {
        let response = try checked(response, answering: request)
        guard let nonce = (try? JSONValue(parsing: response.body))?["Nonce"]?.stringValue, !nonce.isEmpty else {
            throw .unexpectedResponse(status: response.status, reason: "no Nonce in the answer")
        }
        return nonce
    }

    /// A nonce, then the refresh request to `{prefix}/token` (`assertion=`, macOS 14+), the
    /// answer checked; the new refresh token replaces the old one (and is saved). `presenting`
    /// sends another token than the Mac's own (the demo replays an old one).
    @discardableResult
    public func refresh(presenting token: String? = nil, now: Int64? = nil) throws(DeviceError) -> MacRefresh {
        guard token != nil || mac.refreshToken != nil else { throw Self.noRefreshToken }
        let clientRequestID = MacRefreshRequest.newNonce()
        let serverNonce = try nonce(clientRequestID: clientRequestID)
        let pending = try refreshRequest(clientRequestID: clientRequestID, serverNonce: serverNonce, presenting: token, now: now)
        return try acceptRefresh(send(pending.request), pending)
    }

    /// A refresh request as sent, kept to check its answer.
    struct PendingRefresh {
        let request: SessionRequest
        let refresh: MacRefreshRequest
        let clientRequestID: String
        /// The request's time (`iat`), against which the answer's lifetimes are checked.
        let time: Int64
    }

    private static let noRefreshToken = DeviceError.configuration("the Mac has no refresh token; register first")

    /// The signed refresh request over `serverNonce`, for a caller that sends it itself.
    func refreshRequest(clientRequestID: String, serverNonce: String, presenting token: String? = nil,
                        now: Int64? = nil) throws(DeviceError) -> PendingRefresh {
        guard let refreshToken = token ?? mac.refreshToken else { throw Self.noRefreshToken }
        let time = now ?? Int64(Date().timeIntervalSince1970)
        let refresh = MacRefreshRequest(mac: mac, clientID: configuration.clientID, audience: configuration.audience,
                                        serverNonce: serverNonce, refreshToken: refreshToken,
                                        nonceClaimName: configuration.nonceClaimName, now: time)
        let form = "platform_sso_version=1.0&grant_type=" + Self.formEscaped(PlatformSSOTokenForm.grantType)
            + "&assertion=" + Self.formEscaped(try refresh.signed(by: mac))
        let request = Self.form(configuration.prefix + "/token", body: form, headers: [
            ("client-request-id", clientRequestID), ("Accept", "application/platformsso-login-response+jwt"),
        ])
        return PendingRefresh(request: request, refresh: refresh, clientRequestID: clientRequestID, time: time)
    }

    /// Checks the answer to a `refreshRequest` as a Mac does; its refresh token replaces the
    /// Mac's (and is saved).
    @discardableResult
    func acceptRefresh(_ response: HTTPClientResponse, _ pending: PendingRefresh) throws(DeviceError) -> MacRefresh {
        let response = try Self.checked(response, answering: pending.request)
        guard response.header("Content-Type") == LoginResponseType.contentType else {
            throw .unexpectedResponse(status: response.status, reason: "Content-Type is not \(LoginResponseType.contentType)")
        }
        let expected = MacLoginResponse.Expectations(issuer: configuration.issuer, clientID: configuration.clientID)
        let checked: MacLoginResponse
        if let cached = jwksCache,
           let result = try? MacLoginResponse(jwe: response.text, mac: mac, request: pending.refresh, jwks: cached,
                                              expected: expected, now: pending.time) {
            checked = result
        } else {
            let jwks = try self.jwks()
            checked = try MacLoginResponse(jwe: response.text, mac: mac, request: pending.refresh, jwks: jwks,
                                           expected: expected, now: pending.time)
            jwksCache = jwks
        }
        mac.refreshToken = checked.refreshToken
        try save()
        return MacRefresh(request: pending.refresh, response: checked, clientRequestID: pending.clientRequestID)
    }

    /// `GET /.well-known/jwks.json` (a Mac fetches it again when a kid is unknown).
    public func jwks() throws(DeviceError) -> JSONValue {
        let response: HTTPClientResponse
        do {
            response = try gateway.request(method: "GET", path: "/.well-known/jwks.json")
        } catch {
            throw .transport(error)
        }
        guard response.status == 200, let document = try? JSONValue(parsing: response.body) else {
            throw .unexpectedResponse(status: response.status, reason: "no JWKS document")
        }
        return document
    }

    private func save() throws(DeviceError) {
        if let statePath { try mac.save(to: statePath) }
    }

    private func send(_ request: SessionRequest) throws(DeviceError) -> HTTPClientResponse {
        do {
            return try gateway.request(method: request.method, path: request.path, headers: request.headers, body: request.body)
        } catch {
            throw .transport(error)
        }
    }

    /// A form POST to the gateway.
    private static func form(_ path: String, body: String, headers: [(name: String, value: String)]) -> SessionRequest {
        SessionRequest(method: "POST", path: path, headers: headers + [("Content-Type", "application/x-www-form-urlencoded")],
                       body: Array(body.utf8))
    }

    /// The answer itself; an error status becomes `.rejected` with the OAuth `error` as code and
    /// `error_description` as message.
    static func checked(_ response: HTTPClientResponse, answering request: SessionRequest) throws(DeviceError) -> HTTPClientResponse {
        guard response.status < 400 else {
            let document = try? JSONValue(parsing: response.body)
            throw .rejected(GatewayRejection(
                status: response.status, code: document?["error"]?.stringValue ?? "http_\(response.status)",
                message: document?["error_description"]?.stringValue ?? response.text,
                requestID: document?["requestId"]?.stringValue ?? response.header("X-Request-ID"),
                request: "\(request.method) \(request.path)"))
        }
        return response
    }

    private func adminRequest(_ method: String, _ path: String, body: [UInt8]?) throws(DeviceError) -> HTTPClientResponse {
        guard let endpoint = configuration.session.admin else { throw .configuration("registering needs the admin URL") }
        guard let token = configuration.session.adminToken, !token.isEmpty else {
            throw .configuration("registering needs the admin token")
        }
        let client = admin ?? BlockingHTTPClient(endpoint: endpoint, timeout: configuration.session.timeout)
        admin = client
        let response: HTTPClientResponse
        do {
            var headers: [(name: String, value: String)] = [("Authorization", "Bearer \(token)")]
            if body != nil { headers.append(("Content-Type", "application/json")) }
            response = try client.request(method: method, path: path, headers: headers, body: body)
        } catch {
            throw .transport(error)
        }
        guard response.status < 400 else { throw .rejected(GatewayRejection(response: response, request: "\(method) \(path)")) }
        return response
    }

    /// `application/x-www-form-urlencoded` escaping: everything but unreserved characters.
    static func formEscaped(_ text: String) -> String {
        var out = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                let hex = Array("0123456789ABCDEF".utf8)
                out += "%" + String(decoding: [hex[Int(byte >> 4)], hex[Int(byte & 0x0F)]], as: UTF8.self)
            }
        }
        return out
    }
}
