public import AGCrypto
import AGHTTP
import AGDevTools
import AGFormats
import AGJOSE

/// Where a device session talks to: the gateway's public listener and, for registering keys,
/// the admin listener with its bearer token.
public struct DeviceSessionConfiguration: Sendable {
    public var gateway: HTTPEndpoint
    public var admin: HTTPEndpoint?
    public var adminToken: String?
    /// Limit for each HTTP request.
    public var timeout: Duration

    public init(gateway: HTTPEndpoint, admin: HTTPEndpoint? = nil, adminToken: String? = nil,
                timeout: Duration = .seconds(10)) {
        self.gateway = gateway
        self.admin = admin
        self.adminToken = adminToken
        self.timeout = timeout
    }
}

/// The result of importing the device key through the admin API.
public struct DeviceRegistration: Sendable, Equatable {
    public let appID: String
    /// Standard base64, as refresh requests carry it.
    public let keyID: String
    /// The counter the gateway now holds for the key.
    public let counter: UInt32
    /// The admin API's status (200, 201 or 204).
    public let status: Int
}

/// A single-use challenge from `GET /api/v1/attestation/challenge`.
public struct AttestationChallenge: Sendable, Equatable {
    public let value: String
    public let expiresAt: String?
    public let ttl: Int64?
}

/// A token minted by the refresh call.
public struct IssuedToken: Sendable, Equatable {
    /// The compact JWS.
    public let token: String
    public let expiresAt: String?

    /// The first 16 characters and an ellipsis: enough to tell tokens apart, useless to replay.
    public var redacted: String { "\(token.prefix(16))…" }

    /// The token's header and claims, decoded but not verified (the device has no reason to
    /// verify: the gateway that minted it is the one that checks it).
    public func decoded() throws(DeviceError) -> (header: JSONValue, claims: JSONValue) {
        let jws: JWSCompact
        do {
            jws = try JWSCompact(parsing: token)
        } catch {
            throw .unexpectedResponse(status: 200, reason: "token is not a compact JWS: \(error)")
        }
        guard let claims = try? JSONValue(parsing: jws.payload), claims.objectValue != nil else {
            throw .unexpectedResponse(status: 200, reason: "token payload is not a JSON object")
        }
        return (.object(jws.header.members), claims)
    }
}

/// Plays one App Attest device against a gateway: key registration (admin import or test-CA
/// attestation), challenge, refresh and calls through the proxy with the minted token.
///
/// Blocking and not thread-safe: one session per thread. With a `statePath` the device is
/// saved after every assertion, before the assertion is sent, so a later run never repeats
/// a counter the gateway may have seen (it would answer `reattest_required` and drop the key).
public final class DeviceSession {
    public let configuration: DeviceSessionConfiguration
    public private(set) var device: SimulatedDevice
    public let statePath: String?
    /// The token of the last successful refresh.
    public private(set) var token: IssuedToken?

    static let challengePath = "/api/v1/attestation/challenge"
    static let refreshPath = "/api/v1/attestation/refresh"
    static let validatePath = "/api/v1/attestation/validate"

    private let gatewayClient: BlockingHTTPClient
    private var adminClient: BlockingHTTPClient?

    public convenience init(configuration: DeviceSessionConfiguration, device: SimulatedDevice, statePath: String? = nil) {
        self.init(configuration: configuration, device: device, statePath: statePath,
                  gatewayClient: BlockingHTTPClient(endpoint: configuration.gateway, timeout: configuration.timeout),
                  adminClient: nil)
    }

    /// A session sending through clients that sessions on the same thread may share.
    init(configuration: DeviceSessionConfiguration, device: SimulatedDevice, statePath: String?,
         gatewayClient: BlockingHTTPClient, adminClient: BlockingHTTPClient?) {
        self.configuration = configuration
        self.device = device
        self.statePath = statePath
        self.gatewayClient = gatewayClient
        self.adminClient = adminClient
    }

    private var tenantHeaders: [(name: String, value: String)] {
        [("X-Team-ID", device.teamID), ("X-Bundle-ID", device.bundleID)]
    }

    // MARK: - Calls

    /// Imports the device key with its current counter (`PUT /admin/v1/tenants/{appId}/keys/{keyId}`),
    /// then saves the state. Importing an already known key again resets its counter to ours.
    @discardableResult
    public func register() throws(DeviceError) -> DeviceRegistration {
        guard let admin = configuration.admin else { throw .configuration("registering needs the admin URL") }
        guard let adminToken = configuration.adminToken, !adminToken.isEmpty else {
            throw .configuration("registering needs the admin token")
        }
        let client: BlockingHTTPClient
        if let existing = adminClient {
            client = existing
        } else {
            client = BlockingHTTPClient(endpoint: admin, timeout: configuration.timeout)
            adminClient = client
        }
        let body = JSONValue.object([
            "publicKey": .string(Base64.encode(device.publicKeyX963)),
            "counter": .integer(Int64(device.counter)),
        ])
        let response = try send(client, method: "PUT",
                                path: "/admin/v1/tenants/\(device.appID)/keys/\(device.keyIDForPath)",
                                headers: [("Authorization", "Bearer \(adminToken)"), ("Content-Type", "application/json")],
                                body: body.serialized())
        try saveState()
        return DeviceRegistration(appID: device.appID, keyID: device.keyID, counter: device.counter,
                                  status: response.status)
    }

    /// Fetches a challenge for the device's tenant.
    public func challenge() throws(DeviceError) -> AttestationChallenge {
        try Self.challenge(answering: send(gatewayClient, challengeRequest))
    }

    /// The challenge request, for a caller that sends it itself (the load generator).
    var challengeRequest: SessionRequest {
        SessionRequest(method: "GET", path: Self.challengePath, headers: tenantHeaders, body: nil)
    }

    /// The challenge in the answer to `challengeRequest`.
    static func challenge(answering response: HTTPClientResponse) throws(DeviceError) -> AttestationChallenge {
        let document = try Self.jsonObject(response)
        guard let value = document["challenge"]?.stringValue, !value.isEmpty else {
            throw .unexpectedResponse(status: response.status, reason: "no challenge string")
        }
        return AttestationChallenge(value: value, expiresAt: document["expiresAt"]?.stringValue,
                                    ttl: document["ttl"]?.integerValue)
    }

    /// Fetches a challenge, then exchanges an assertion over it for a token.
    @discardableResult
    public func refresh(subjectID: String? = nil) throws(DeviceError) -> IssuedToken {
        try refresh(with: challenge(), subjectID: subjectID)
    }

    /// Exchanges an assertion over `challenge` for a token (`POST /api/v1/attestation/refresh`).
    @discardableResult
    public func refresh(with challenge: AttestationChallenge, subjectID: String? = nil) throws(DeviceError) -> IssuedToken {
        let request = try refreshRequest(with: challenge, subjectID: subjectID)
        return try acceptRefresh(send(gatewayClient, request))
    }

    /// The refresh request over `challenge`, for a caller that sends it itself (the load
    /// generator). Makes the assertion: the device's counter moves on (and is saved) here.
    func refreshRequest(with challenge: AttestationChallenge, subjectID: String? = nil) throws(DeviceError) -> SessionRequest {
        let (assertion, clientDataHash) = try device.makeAssertion(challenge: challenge.value)
        try saveState()
        var members: [String: JSONValue] = [
            "keyId": .string(device.keyID),
            "assertion": .string(Base64.encode(assertion)),
            "clientDataHash": .string(Base64.encode(clientDataHash)),
            "challenge": .string(challenge.value),
        ]
        if let subjectID { members["subjectId"] = .string(subjectID) }
        return SessionRequest(method: "POST", path: Self.refreshPath,
                             headers: tenantHeaders + [("Content-Type", "application/json")],
                             body: JSONValue.object(members).serialized())
    }

    /// The token in the answer to a `refreshRequest`, kept as the session's token.
    @discardableResult
    func acceptRefresh(_ response: HTTPClientResponse) throws(DeviceError) -> IssuedToken {
        let document = try Self.jsonObject(response)
        guard let value = document["token"]?.stringValue, !value.isEmpty else {
            throw .unexpectedResponse(status: response.status, reason: "no token string")
        }
        let issued = IssuedToken(token: value, expiresAt: document["expiresAt"]?.stringValue)
        token = issued
        return issued
    }

    /// Registers the device key by attestation (`POST /api/v1/attestation/validate`) instead of
    /// the admin import: fetches a challenge, attests the key with a certificate from `testCA`
    /// (the gateway must trust it as `app_attest.test_ca`), saves the state and keeps the token.
    @discardableResult
    public func attest(testCA: TestCertificateAuthority, environment: SimulatedAttestationEnvironment = .development,
                       subjectID: String? = nil) throws(DeviceError) -> IssuedToken {
        let challenge = try challenge()
        let (attestationObject, clientDataHash) = try device.makeAttestation(challenge: challenge.value, testCA: testCA,
                                                                             environment: environment)
        var members: [String: JSONValue] = [
            "keyId": .string(device.keyID),
            "attestationObject": .string(Base64.encode(attestationObject)),
            "clientDataHash": .string(Base64.encode(clientDataHash)),
            "challenge": .string(challenge.value),
        ]
        if let subjectID { members["subjectId"] = .string(subjectID) }
        let response = try send(gatewayClient, method: "POST", path: Self.validatePath,
                                headers: tenantHeaders + [("Content-Type", "application/json")],
                                body: JSONValue.object(members).serialized())
        let document = try Self.jsonObject(response)
        guard let value = document["token"]?.stringValue, !value.isEmpty else {
            throw .unexpectedResponse(status: response.status, reason: "no token string")
        }
        // The gateway stored counter 0 for the key: assertions continue from the device's counter.
        try saveState()
        let issued = IssuedToken(token: value, expiresAt: document["expiresAt"]?.stringValue)
        token = issued
        return issued
    }

    /// Calls `path` through the gateway's proxy with `Authorization: Bearer <token>`.
    ///
    /// Refreshes first when the session has no token yet, and once more when the gateway
    /// answers `token_expired`. Statuses of 400 and above throw `.rejected`.
    public func call(path: String, method: String = "GET", body: [UInt8]? = nil,
                     headers: [(name: String, value: String)] = []) throws(DeviceError) -> HTTPClientResponse {
        var refreshed = false
        if token == nil {
            try refresh()
            refreshed = true
        }
        while true {
            var all = headers + [("Authorization", "Bearer \(token!.token)")]
            if body != nil && !headers.contains(where: { $0.name.lowercased() == "content-type" }) {
                all.append(("Content-Type", "application/json"))
            }
            do {
                return try send(gatewayClient, method: method, path: path, headers: all, body: body)
            } catch .rejected(let rejection) where rejection.code == "token_expired" && !refreshed {
                try refresh()
                refreshed = true
            }
        }
    }

    // MARK: - Plumbing

    private func saveState() throws(DeviceError) {
        if let statePath { try device.save(to: statePath) }
    }

    /// Sends a request; statuses of 400 and above become `.rejected` with the envelope's fields.
    private func send(_ client: BlockingHTTPClient, method: String, path: String,
                      headers: [(name: String, value: String)], body: [UInt8]?) throws(DeviceError) -> HTTPClientResponse {
        try send(client, SessionRequest(method: method, path: path, headers: headers, body: body))
    }

    private func send(_ client: BlockingHTTPClient, _ request: SessionRequest) throws(DeviceError) -> HTTPClientResponse {
        let response: HTTPClientResponse
        do {
            response = try client.request(method: request.method, path: request.path, headers: request.headers,
                                          body: request.body)
        } catch {
            throw .transport(error)
        }
        return try Self.checked(response, answering: request)
    }

    /// The answer itself; a status of 400 or above becomes `.rejected` with the envelope's fields.
    static func checked(_ response: HTTPClientResponse, answering request: SessionRequest) throws(DeviceError) -> HTTPClientResponse {
        guard response.status < 400 else {
            throw .rejected(GatewayRejection(response: response, request: "\(request.method) \(request.path)"))
        }
        return response
    }

    private static func jsonObject(_ response: HTTPClientResponse) throws(DeviceError) -> JSONValue {
        guard let document = try? JSONValue(parsing: response.body), document.objectValue != nil else {
            throw .unexpectedResponse(status: response.status, reason: "body is not a JSON object")
        }
        return document
    }
}

extension GatewayRejection {
    /// The rejection an error response describes: its envelope when it has one.
    public init(response: HTTPClientResponse, request: String? = nil) {
        let envelope = try? JSONValue(parsing: response.body)
        let code = envelope?["code"]?.stringValue ?? "http_\(response.status)"
        let message = envelope?["error"]?.stringValue
            ?? String(String(decoding: response.body.prefix(200), as: UTF8.self).prefix(200))
        let requestID = envelope?["requestId"]?.stringValue ?? response.header("X-Request-ID")
        self.init(status: response.status, code: code, message: message, requestID: requestID, request: request)
    }
}

/// A request a session built, for its caller to send (`BlockingHTTPClient.send`) and to hand
/// the answer back to the session (the load generator).
struct SessionRequest {
    let method: String
    let path: String
    let headers: [(name: String, value: String)]
    let body: [UInt8]?
}
