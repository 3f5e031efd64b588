import AGCrypto
import AGHTTP
import AGDevice
import AGFormats
import AGJOSE
import AGPolicy
import AGTestSupport
import Foundation

/// A gateway with one proxying tenant in front of a `RecordingUpstream`, and ways to get
/// tokens for it: the real device flow, or signing arbitrary claims with the gateway's key.
final class ProxyFixture: @unchecked Sendable {
    // Invariant: used by one test at a time.
    let upstream: RecordingUpstream
    let gateway: TestGateway
    let teamID: String
    let bundleID = "com.example.app"
    var appID: String { "\(teamID).\(bundleID)" }
    var tenantHeaders: [(String, String)] { [("X-Team-ID", teamID), ("X-Bundle-ID", bundleID)] }

    static func tenantYAML(teamID: String, upstreamPort: Int, tier: String = "test", extra: String = "") -> String {
        TestGateway.tenantYAML(teamID: teamID, tier: tier, extra: """
            upstream: http://127.0.0.1:\(upstreamPort)/base
            custom_claims:
              plan: gold
            routes:
              - prefix: /api
                auth: required
              - prefix: /public
                auth: none
            forward:
              claims:
                sub: X-Attest-Key-Id
                team_id: X-Attest-Team-Id
                bundle_id: X-Attest-Bundle-Id
                subject_id: X-Attest-Subject-Id
                custom_claims.plan: X-Plan
            \(extra)
            """)
    }

    init(teamID: String = TestGateway.randomTeamID(), redisURL: String = TestGateway.sharedRedisURL,
         upstream: RecordingUpstream? = nil, tenantExtra: String = "", tier: String = "test",
         otherTenants: [String: String] = [:], gatewayYAML: String = "", workers: Int = 2,
         keys: [(kid: String, algorithm: String, active: Bool)] = [("test-es256", "ES256", true)],
         redisTimeout: String = "250ms", time: (any TimeSource)? = nil) throws {
        self.teamID = teamID
        self.upstream = try upstream ?? RecordingUpstream()
        var tenants = otherTenants
        tenants["proxy.yaml"] = Self.tenantYAML(teamID: teamID, upstreamPort: self.upstream.port, tier: tier, extra: tenantExtra)
        gateway = try TestGateway(redisURL: redisURL, tenants: tenants, gatewayYAML: gatewayYAML, workers: workers,
                                  redisTimeout: redisTimeout, keys: keys, time: time)
    }

    func stop() {
        gateway.stop()
        upstream.stop()
    }

    /// A device registered through the admin API and a token from the real refresh flow.
    func deviceToken() throws -> (token: String, device: SimulatedDevice) {
        let configuration = DeviceSessionConfiguration(
            gateway: try HTTPEndpoint(url: "http://127.0.0.1:\(gateway.port)"),
            admin: try HTTPEndpoint(url: "http://127.0.0.1:\(gateway.adminPort)"), adminToken: gateway.adminToken)
        let session = DeviceSession(configuration: configuration, device: try SimulatedDevice(teamID: teamID, bundleID: bundleID))
        try session.register()
        return (try session.refresh().token, session.device)
    }

    /// Claims as the gateway would mint them for this tenant, for a made-up device whose key is
    /// on record (imported through the admin API): the proxy refuses tokens of unknown devices.
    func claims(now: Int64 = Int64(Date().timeIntervalSince1970)) -> [String: JSONValue] {
        let key = (try? P256.PrivateKey())!.publicKey
        let keyID = Base64.encode(SHA256.hash(key.x963Representation))
        _ = try? gateway.importKey(appID: appID, keyID: keyID, publicKey: Base64.encode(key.x963Representation), counter: 0)
        return [
            "iss": "https://attestgate.test", "aud": .string(appID), "sub": .string(keyID),
            "team_id": .string(teamID), "bundle_id": .string(bundleID), "iat": .integer(now), "nbf": .integer(now),
            "exp": .integer(now + 3600), "jti": .string(UUID().uuidString),
        ]
    }

    /// Signs `claims` with the key file `kid` of the gateway, announcing `headerKID`.
    func sign(_ claims: [String: JSONValue], kid: String = "test-es256", headerKID: String? = nil) throws -> String {
        let pem = try TestFile.text(gateway.directory + "/keys/\(kid).pem")
        let key: JWSSigningKey = pem.contains("EC PRIVATE") || (try? P256.PrivateKey(pemRepresentation: pem)) != nil
            ? .es256(try P256.PrivateKey(pemRepresentation: pem)) : .rs256(try RSAKey.PrivateKey(pemRepresentation: pem))
        return try JWTSigner(key: key, keyID: headerKID ?? kid).sign(claims: claims)
    }

    func get(_ target: String, token: String? = nil, headers: [(String, String)]? = nil) throws -> TestResponse {
        var all = headers ?? tenantHeaders
        if let token { all.append(("Authorization", "Bearer \(token)")) }
        return try gateway.send("GET", target, headers: all)
    }

    /// The summed value of a counter in `/metrics` (0 when absent).
    func metric(_ series: String) throws -> Int {
        let text = try gateway.admin("GET", "/metrics").text
        return text.split(separator: "\n").filter { $0.hasPrefix(series + " ") || $0.hasPrefix(series + "{") }
            .compactMap { $0.split(separator: " ").last.flatMap { Int($0) } }.reduce(0, +)
    }
}

/// Every spoofing variant a client might try.
let spoofedHeaders: [(String, String)] = [
    ("X-Attest-Key-Id", "forged-1"), ("x-attest-key-id", "forged-2"), ("X_Attest_Key_Id", "forged-3"),
    ("X-Attest-Team-Id", "forged-4"), ("X-Attest-Team-Id", "forged-5"), ("X-ATTEST-BUNDLE-ID", "forged-6"),
    ("X-Attest-Subject-Id", "forged-7"), ("X-Attest-Claims", "forged-8"), ("x_attest_claims", "forged-9"),
    ("X-Attest-Whatever", "forged-10"), ("X-Plan", "forged-11"), ("x_plan", "forged-12"),
    // Tenant selectors spelt with `_`: never checked against the token (stop 32, independent sweep).
    ("X_Team_ID", "forged-13"), ("x_bundle_id", "forged-14"), ("X-Team_ID", "forged-15"),
]

extension UpstreamRecord {
    /// True when some header value came from `spoofedHeaders`.
    var carriesForgedValue: Bool { headers.contains { $0.value.hasPrefix("forged-") } }
}
