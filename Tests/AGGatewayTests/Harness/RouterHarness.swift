import AGConfig
import AGCrypto
import AGFormats
import AGHTTP
import AGPolicy
import AGTestSupport
import Foundation

@testable import AGGateway

/// Drives the public and admin routers in process (Hummingbird's router test mode): a real
/// configuration snapshot, in-memory fakes of every service, a controlled clock, and
/// `InMemoryExchange` requests. The fakes answer at once, so `send` returns the complete answer.
///
/// The live end-to-end suites run the same routers on sockets with Redis and upstreams; this
/// harness pins down the handlers' decisions: which status and code for which store answer,
/// which state a refused request never touches.
final class RouterHarness {
    static let tenantTeamID = "HARNESS123"
    static let appID = "HARNESS123.com.example.app"
    static let tenantHeaders = [("X-Team-ID", tenantTeamID), ("X-Bundle-ID", "com.example.app")]

    let config: TestConfigDirectory
    let snapshot: GatewaySnapshot
    let time = ManualTime(microseconds: 1_800_000_000_000_000)
    let devices = FakeDevices()
    let challenges: FakeChallenges
    let platformSSO = FakePlatformSSO()
    let limiter: FakeLimiter
    let tiers = FakeTiers()
    let revocations = FakeRevocations()
    let forwarder = FakeForwarder()
    let health = FakeHealth()
    let reloader = FakeReloader()
    let metrics = RecordingMetrics()
    let log = RecordingLog()
    let accessLog = RecordingAccessLog()
    private(set) var services: RouteServices!

    /// `tenantExtra` is appended to the harness tenant's file (routes, upstream, forward…).
    init(tenantExtra: String = "", tier: String = "test", gatewayYAML: String = "") throws {
        config = try TestConfigDirectory(tenants: [
            "harness.yaml": TestGateway.tenantYAML(teamID: Self.tenantTeamID, tier: tier, extra: tenantExtra),
        ], gatewayYAML: gatewayYAML)
        let loaded = try ConfigLoader.load(path: config.gatewayPath)
        snapshot = try GatewaySnapshot(config: loaded, generation: 1, adminToken: config.adminToken)
        limiter = FakeLimiter(time: time)
        challenges = FakeChallenges(time: time)
        services = RouteServices(
            snapshots: FixedSnapshot(snapshot: snapshot), time: time, devices: devices, deviceAdmin: devices,
            challenges: challenges, platformSSO: platformSSO, limiter: limiter, tiers: tiers, revocations: revocations, forwarder: forwarder,
            readiness: health, reloader: reloader, metrics: metrics, metricsText: { "# metrics\n" }, logger: log,
            accessLog: accessLog, tokenCache: TokenCache(), deviceKeys: DeviceKeyCache(), requestIDs: RequestIDSource(),
            random: SecureRandomBuffer())
    }

    var tenant: Tenant { snapshot.tenants[Self.appID]! }

    /// A request to the public router.
    func send(_ method: String, _ target: String, headers: [(String, String)] = [], body: [UInt8] = []) -> HarnessResponse {
        let exchange = InMemoryExchange(method, target, headers: headers, body: body)
        PublicRouter(services: services).handle(exchange)
        return HarnessResponse(exchange)
    }

    /// A request to the admin router, with the admin token unless `token` says otherwise.
    func admin(_ method: String, _ target: String, json: String? = nil, token: String? = nil) -> HarnessResponse {
        let exchange = InMemoryExchange(method, target, headers: [("Authorization", "Bearer \(token ?? config.adminToken)")],
                                        body: json.map { Array($0.utf8) } ?? [])
        AdminRouter(services: services).handle(exchange)
        return HarnessResponse(exchange)
    }

    /// A token the harness's configured key signed, for the tenant, valid now for `ttl`.
    func token(claims extra: [String: JSONValue] = [:], ttl: Int64 = 3600, keyID: String = "a2V5LWlk") throws -> String {
        let now = time.nowMilliseconds / 1000
        var claims: [String: JSONValue] = [
            "iss": "https://attestgate.test", "aud": .string(Self.appID), "sub": .string(keyID),
            "team_id": .string(Self.tenantTeamID), "bundle_id": "com.example.app",
            "iat": .integer(now), "nbf": .integer(now), "exp": .integer(now + ttl),
        ]
        for (name, value) in extra { claims[name] = value }
        return try snapshot.tokenKeys.signer.sign(claims: claims)
    }
}

/// A snapshot that never changes.
struct FixedSnapshot: SnapshotSource {
    let snapshot: GatewaySnapshot
}

/// What a router answered.
struct HarnessResponse {
    let status: Int
    let headers: HTTPHeaders
    let body: [UInt8]

    init(_ exchange: InMemoryExchange) {
        let response = exchange.response
        status = response?.status ?? -1
        headers = response?.headers ?? HTTPHeaders()
        body = response?.body ?? []
    }

    var json: [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any] ?? [:]
    }

    var code: String? { json["code"] as? String }

    func header(_ name: String) -> String? { headers[name] }
}
