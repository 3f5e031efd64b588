import AGDevice
import AGFormats
import AGHTTP
import AGPolicy
import AGTestSupport
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// One documented key and how its runtime effect (or its refusal) is observed.
struct KeyEffect: Sendable, CustomTestStringConvertible {
    let key: String
    /// How the effect is observed, in one line (shows in test output).
    let observed: String
    let check: @Sendable () async throws -> Void

    var testDescription: String { key }
}

/// A real gateway for one key check: a tenant (`teamID`) in front of a recording upstream,
/// the gateway sections a check sets, and the flows checks observe effects through.
final class KeyProbe: @unchecked Sendable {
    // Invariant: used by one check, on one task.
    let teamID = TestGateway.randomTeamID()
    let bundleID = "com.example.app"
    var appID: String { "\(teamID).\(bundleID)" }
    var headers: [(String, String)] { [("X-Team-ID", teamID), ("X-Bundle-ID", bundleID)] }
    let upstream: RecordingUpstream
    let gateway: TestGateway

    /// The `server` section with `extra` lines (two-space indented keys).
    static func server(_ extra: String) -> String {
        "server:\n  listen: \"127.0.0.1:0\"\n  workers: 1\n  shutdown_grace: 2s\n" + extra
    }

    /// The tenant file: proxying `/api/` (token required) and `/public/` (none) to the upstream.
    static func tenant(teamID: String, bundleID: String, upstreamPort: Int, tier: String, extra: String,
                       environment: String = "development") -> String {
        TestGateway.tenantYAML(teamID: teamID, bundleID: bundleID, tier: tier, environment: environment, extra: """
            upstream: http://127.0.0.1:\(upstreamPort)/base
            routes:
              - { prefix: /api/, auth: required }
              - { prefix: /public/, auth: none }
            \(extra)
            """)
    }

    init(gatewayYAML: String = "", tenantExtra: String = "", tier: String = "test", environment: String = "development",
         files: [String: String] = [:],
         tenantsDirectory: String = "tenants", redisURL: String = TestGateway.sharedRedisURL, time: (any TimeSource)? = nil,
         keys: [(kid: String, algorithm: String, active: Bool)] = [("test-es256", "ES256", true)]) throws {
        upstream = try RecordingUpstream()
        let tenant = Self.tenant(teamID: teamID, bundleID: bundleID, upstreamPort: upstream.port, tier: tier, extra: tenantExtra,
                                 environment: environment)
        var files = files
        var tenants = ["t.yaml": tenant]
        if tenantsDirectory != "tenants" {
            files[tenantsDirectory + "/t.yaml"] = tenant
            tenants = [:]
        }
        gateway = try TestGateway(redisURL: redisURL, tenants: tenants, gatewayYAML: gatewayYAML, files: files, workers: 1,
                                  keys: keys, time: time)
    }

    deinit {
        gateway.stop()
        upstream.stop()
    }

    func device(counter: UInt32 = 0) throws -> DeviceSession {
        let configuration = DeviceSessionConfiguration(
            gateway: try HTTPEndpoint(url: "http://127.0.0.1:\(gateway.port)"),
            admin: try HTTPEndpoint(url: "http://127.0.0.1:\(gateway.adminPort)"), adminToken: gateway.adminToken)
        return DeviceSession(configuration: configuration, device: try SimulatedDevice(teamID: teamID, bundleID: bundleID))
    }

    /// A registered device's first token: the compact JWS, its header and its claims.
    func token() throws -> (jws: String, header: [String: JSONValue], claims: [String: JSONValue]) {
        let session = try device()
        try session.register()
        let issued = try session.refresh()
        let (header, claims) = try issued.decoded()
        return (issued.token, header.objectValue ?? [:], claims.objectValue ?? [:])
    }

    /// The raw refresh response for a registered device (for its rate-limit headers).
    func refreshResponse() throws -> TestResponse {
        let session = try device()
        try session.register()
        var simulated = session.device
        let challenge = try challenge()
        let (assertion, hash) = try simulated.makeAssertion(challenge: challenge.json["challenge"] as? String ?? "")
        let body = JSONValue.object([
            "keyId": .string(simulated.keyID), "assertion": .string(Base64.encode(assertion)),
            "clientDataHash": .string(Base64.encode(hash)), "challenge": .string(challenge.json["challenge"] as? String ?? ""),
        ]).serialized()
        return try gateway.send("POST", "/api/v1/attestation/refresh", headers: headers + [("Content-Type", "application/json")], body: body)
    }

    func challenge(extraHeaders: [(String, String)] = []) throws -> TestResponse {
        try gateway.send("GET", "/api/v1/attestation/challenge", headers: headers + extraHeaders)
    }

    /// A proxied call with a bearer token in `header` (`Authorization` by default).
    func proxied(_ path: String, token: String?, header: String = "Authorization", method: String = "GET",
                 body: [UInt8]? = nil) throws -> TestResponse {
        var all = headers
        if let token { all.append((header, header == "Authorization" ? "Bearer \(token)" : token)) }
        return try gateway.send(method, path, headers: all, body: body)
    }

    /// The lines of the gateway's log that contain `text`.
    func logLines(_ text: String) -> [Substring] {
        gateway.logText().split(separator: "\n").filter { $0.contains(text) }
    }
}

/// How long `body` takes, in seconds.
func seconds(_ body: () throws -> Void) rethrows -> Double {
    let started = Date()
    try body()
    return Date().timeIntervalSince(started)
}

/// A loopback port that accepts no connection: its listener's backlog is full, so a SYN
/// goes unanswered and `connect` hangs (an upstream that is down behind a firewall).
final class BlackholePort {
    let port: Int
    private var descriptors: [Int32] = []

    init() throws {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, length) == 0 && getsockname(listener, $0, &length) == 0 }
        }
        guard bound, listen(listener, 0) == 0 else { throw RedisServerError.couldNotStart("blackhole listener") }
        port = Int(UInt16(bigEndian: address.sin_port))
        descriptors.append(listener)
        for _ in 0..<3 {
            let filler = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            _ = fcntl(filler, F_SETFL, O_NONBLOCK)
            _ = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(filler, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            descriptors.append(filler)
        }
        usleep(100_000)
    }

    deinit {
        for descriptor in descriptors { close(descriptor) }
    }
}
