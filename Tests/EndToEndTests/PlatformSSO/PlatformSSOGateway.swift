import AGCrypto
import AGDevice
import AGFormats
import AGPlatformSSO
import AGTestSupport
import Foundation
import Testing

/// A real gateway with one Platform SSO tenant at `/psso`, its clock a `ManualTime`, and the
/// steps a Mac and its IdP take, for the end-to-end tests.
final class PlatformSSOGateway {
    static let clientID = "psso-test-client"
    static let audience = "https://gateway.test/psso/token"
    static let tokenGrant = "urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer"

    let teamID = TestGateway.randomTeamID()
    let time = ManualTime()
    let gateway: TestGateway
    var appID: String { "\(teamID).com.example.app" }
    var nowSeconds: Int64 { time.nowMicroseconds / 1_000_000 }

    /// `settings` are extra `platform_sso` lines (`reuse_grace: 0s`); `tenantExtra` extra tenant
    /// lines; `gatewayYAML` top-level gateway sections.
    init(settings: [String] = [], tier: String = "test", tenantExtra: String = "", gatewayYAML: String = "",
         redisURL: String = TestGateway.sharedRedisURL, redisTimeout: String = "250ms") throws {
        let sso = (["platform_sso:", "  path_prefix: /psso", "  client_id: \(Self.clientID)",
                    "  audience: [\(Self.audience), https://gateway.test/psso/refresh]"]
                   + settings.map { "  " + $0 }).joined(separator: "\n")
        gateway = try TestGateway(redisURL: redisURL,
                                  tenants: ["psso.yaml": TestGateway.tenantYAML(teamID: teamID, tier: tier, extra: sso + "\n" + tenantExtra)],
                                  gatewayYAML: gatewayYAML, redisTimeout: redisTimeout, time: time)
        // A cluster or Sentinel deployment connects after `serving`, each worker on its own: a
        // call sent before its worker's store answers is a 503 (seen on a loaded machine), not
        // what these tests are about. Each /readyz lands on some worker; six in a row pass
        // once every worker is connected (an instrumented build connects later).
        _ = try? eventually(TestBuild.sanitizer == nil ? 5 : 20) { try (0..<6).allSatisfy { _ in try self.gateway.send("GET", "/readyz").status == 200 } }
    }

    func stop() { gateway.stop() }

    var devicesPath: String { "/admin/v1/tenants/\(appID)/psso/devices" }

    /// A Mac with fresh keys, not yet registered.
    func newMac(subject: String = "user-42") throws -> SimulatedMac {
        try SimulatedMac(teamID: teamID, bundleID: "com.example.app", subject: subject)
    }

    /// `PUT …/psso/devices/{kid}` with the signing key as PEM and the encryption key as JWK.
    func register(_ mac: SimulatedMac, claims: JSONValue = ["name": "Ada"]) throws -> TestResponse {
        let body: JSONValue = ["signingKey": .string(mac.signingKey.publicKey.pemRepresentation),
                               "encryptionKey": mac.encryptionKey.publicKey.jwk,
                               "user": ["sub": .string(mac.subject), "claims": claims]]
        return try gateway.admin("PUT", "\(devicesPath)/\(mac.keyID.urlSafe)", json: body.serializedString())
    }

    /// `POST …/refresh-tokens`: a new family's first token.
    func mint(_ mac: SimulatedMac) throws -> String {
        let response = try gateway.admin("POST", "\(devicesPath)/\(mac.keyID.urlSafe)/refresh-tokens")
        try #require(response.status == 201, "\(response.text)")
        return try #require(response.json["refresh_token"] as? String)
    }

    /// A registered Mac and the first token of a new family.
    func enrolledMac(subject: String = "user-42") throws -> (mac: SimulatedMac, token: String) {
        let mac = try newMac(subject: subject)
        let registered = try register(mac)
        try #require(registered.status == 201, "\(registered.text)")
        return (mac, try mint(mac))
    }

    /// `POST /psso/nonce`.
    func nonce() throws -> String {
        let response = try gateway.send("POST", "/psso/nonce", headers: [("Content-Type", "application/x-www-form-urlencoded")],
                                        body: Array("grant_type=srv_challenge".utf8))
        try #require(response.status == 200, "\(response.text)")
        return try #require(response.json["Nonce"] as? String)
    }

    /// A valid refresh request for `mac` presenting `token`, at the gateway's now.
    func request(_ mac: SimulatedMac, token: String, nonce: String) -> MacRefreshRequest {
        MacRefreshRequest(mac: mac, clientID: Self.clientID, audience: Self.audience, serverNonce: nonce, refreshToken: token,
                          now: nowSeconds)
    }

    /// The token form around `jws`.
    static func form(_ jws: String, field: String = "assertion") -> [UInt8] {
        Array("platform_sso_version=1.0&grant_type=\(tokenGrant)&\(field)=\(jws)".utf8)
    }

    /// `POST /psso/token` (or `path`) with `body`.
    func post(_ body: [UInt8], path: String = "/psso/token", headers: [(String, String)] = []) throws -> TestResponse {
        try gateway.send("POST", path, headers: [("Content-Type", "application/x-www-form-urlencoded")] + headers, body: body)
    }

    /// A fresh nonce and a valid request presenting `token`.
    func refresh(_ mac: SimulatedMac, token: String, headers: [(String, String)] = []) throws
        -> (response: TestResponse, request: MacRefreshRequest) {
        let request = request(mac, token: token, nonce: try nonce())
        return (try post(Self.form(try request.signed(by: mac)), headers: headers), request)
    }

    /// Decrypts and checks a 200 answer as a Mac does.
    func login(_ response: TestResponse, _ mac: SimulatedMac, _ request: MacRefreshRequest,
               type: String = "platformsso-login-response+jwt") throws -> MacLoginResponse {
        try #require(response.status == 200, "\(response.text)")
        let jwks = try JSONValue(parsing: try gateway.send("GET", "/.well-known/jwks.json").body)
        return try MacLoginResponse(jwe: response.text, mac: mac, request: request, jwks: jwks,
                                    expected: .init(issuer: "https://attestgate.test", clientID: Self.clientID, type: type),
                                    now: nowSeconds)
    }

    /// Refreshes and returns the successor token.
    func rotate(_ mac: SimulatedMac, token: String) throws -> String {
        let (response, request) = try refresh(mac, token: token)
        return try login(response, mac, request).refreshToken
    }

    // MARK: What Redis holds

    func redis(_ arguments: String...) throws -> String { try RedisCLI.run(gateway.redisURL, arguments) }

    /// The server nonce's state: issue ms, `used:<ms>`, or empty.
    func nonceState(_ nonce: String) throws -> String { try redis("GET", "ag:{\(appID)}:psso:nonce:\(nonce)") }

    /// The `cur` digest of `token`'s family.
    func currentDigest(ofFamilyOf token: String) throws -> String {
        let parsed = try #require(PlatformSSORefreshToken(presented: token))
        return try redis("HGET", "ag:{\(appID)}:psso:fam:\(parsed.familyID)", "cur")
    }

    /// Whether `token`'s family was revoked (after a reuse).
    func familyRevoked(_ token: String) throws -> Bool {
        let parsed = try #require(PlatformSSORefreshToken(presented: token))
        return try redis("HGET", "ag:{\(appID)}:psso:fam:\(parsed.familyID)", "rev") == "1"
    }

    static func digest(_ token: String) -> String { PlatformSSORefreshToken(presented: token)?.digest ?? "" }
}

extension TestResponse {
    /// The OAuth `error` of a Platform SSO refusal.
    var oauthError: String? { json["error"] as? String }
}
