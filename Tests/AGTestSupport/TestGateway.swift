#if canImport(Glibc)
import Glibc
#endif
import AGConfig
import AGPolicy
import AGGateway
import Foundation

/// A real gateway for end-to-end tests: a temporary config directory, ports chosen by the
/// kernel, a real Redis, logs captured in files the test can read.
public final class TestGateway: @unchecked Sendable {
    // Invariant: mutated only by the test that owns it, from one task.
    public let directory: String
    public let gateway: Gateway
    public let adminToken: String
    public let redisURL: String
    public var port: Int { gateway.publicPort }
    public var adminPort: Int { gateway.adminPort }
    public var logPath: String { directory + "/gateway.log" }
    public var accessLogPath: String { directory + "/access.log" }

    /// A tenant file body for `teamID` with the example bundle id, plus `extra` YAML lines.
    /// `tier` defaults to `test`, whose limits no functional test reaches (see `init`).
    public static func tenantYAML(teamID: String, bundleID: String = "com.example.app", tier: String = "test",
                                  environment: String = "development", extra: String = "") -> String {
        """
        team_id: \(teamID)
        bundle_id: \(bundleID)
        tier: \(tier)
        environment: \(environment)
        \(extra)
        """
    }

    /// A random team id (10 uppercase alphanumerics), so tests sharing one Redis never collide.
    public static func randomTeamID() -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
        return String((0..<10).map { _ in alphabet.randomElement()! })
    }

    /// The Redis URL for non-destructive tests: `AG_TEST_REDIS_URL` (scripts/test starts it).
    public static var sharedRedisURL: String {
        ProcessInfo.processInfo.environment["AG_TEST_REDIS_URL"] ?? "redis://127.0.0.1:6379/0"
    }

    /// Starts a gateway. `tenants` maps file names to YAML; `gatewayYAML` adds top-level
    /// sections (they replace the defaults written here when they share a name); `files` maps
    /// names relative to the config directory to contents written before the gateway starts
    /// (a test CA certificate, for example).
    public init(redisURL: String = TestGateway.sharedRedisURL, tenants: [String: String], gatewayYAML: String = "",
                files: [String: String] = [:],
                workers: Int = 2, redisTimeout: String = "250ms", keys: [(kid: String, algorithm: String, active: Bool)] = [("test-es256", "ES256", true)],
                time: (any TimeSource)? = nil) throws {
        directory = NSTemporaryDirectory() + "attestgate-test-" + UUID().uuidString
        let manager = FileManager.default
        try manager.createDirectory(atPath: directory + "/tenants", withIntermediateDirectories: true)
        try manager.createDirectory(atPath: directory + "/keys", withIntermediateDirectories: true)
        self.redisURL = redisURL
        adminToken = UUID().uuidString + UUID().uuidString
        try adminToken.write(toFile: directory + "/admin-token", atomically: true, encoding: .utf8)
        let rootCA = try String(contentsOfFile: Self.fixturePath("Apple_App_Attestation_Root_CA.pem"), encoding: .utf8)
        try rootCA.write(toFile: directory + "/root-ca.pem", atomically: true, encoding: .utf8)
        var keyLines = ""
        for key in keys {
            try SigningKeyGenerator.generate(algorithm: TokenAlgorithm(rawValue: key.algorithm)!, path: directory + "/keys/\(key.kid).pem")
            keyLines += "    - { kid: \(key.kid), algorithm: \(key.algorithm), file: keys/\(key.kid).pem, active: \(key.active) }\n"
        }
        var sections: [String: String] = [
            "server": "server:\n  listen: \"127.0.0.1:0\"\n  workers: \(workers)\n  shutdown_grace: 2s\n",
            "admin": "admin:\n  listen: \"127.0.0.1:0\"\n  token_file: admin-token\n",
            "redis": "redis:\n  url: \(redisURL)\n  timeout: \(redisTimeout)\n",
            "tokens": "tokens:\n  issuer: https://attestgate.test\n  keys:\n\(keyLines)",
            "app_attest": "app_attest:\n  root_ca: root-ca.pem\n",
            "log": "log:\n  level: debug\n",
            "tiers": "tiers:\n  test: { attest: 1000000, challenge: 1000000, api: 1000000, mad_limit: unlimited }\n",
            "ip_limits": "ip_limits:\n  challenge: 1000000\n  validate: 1000000\n",
        ]
        // Later sections with the same top-level key replace the defaults.
        var current: String?
        for line in gatewayYAML.split(separator: "\n", omittingEmptySubsequences: false) {
            if let first = line.first, first != " ", first != "#", let colon = line.firstIndex(of: ":") {
                current = String(line[..<colon])
                sections[current!] = ""
            }
            if let current { sections[current, default: ""] += line + "\n" }
        }
        let yaml = sections.keys.sorted().map { sections[$0]! }.joined()
        try yaml.write(toFile: directory + "/gateway.yaml", atomically: true, encoding: .utf8)
        for (name, body) in tenants {
            try body.write(toFile: directory + "/tenants/" + name, atomically: true, encoding: .utf8)
        }
        for (name, body) in files {
            try body.write(toFile: directory + "/" + name, atomically: true, encoding: .utf8)
        }
        let logFD = open(directory + "/gateway.log", O_WRONLY | O_CREAT | O_APPEND, 0o644)
        let accessFD = open(directory + "/access.log", O_WRONLY | O_CREAT | O_APPEND, 0o644)
        gateway = try Gateway(configPath: directory + "/gateway.yaml",
                              logger: Logger(level: .debug, format: .json, fileDescriptor: logFD),
                              accessLog: Logger(level: .info, format: .json, fileDescriptor: accessFD), time: time)
    }

    deinit {
        try? FileManager.default.removeItem(atPath: directory)
    }

    public func stop() {
        gateway.shutdown()
    }

    /// Writes (or replaces) a tenant file.
    public func writeTenant(_ name: String, _ yaml: String) throws {
        let temporary = directory + "/tenants/." + name + ".tmp"
        try yaml.write(toFile: temporary, atomically: false, encoding: .utf8)
        rename(temporary, directory + "/tenants/" + name)
    }

    /// A request to the public listener.
    public func send(_ method: String, _ target: String, headers: [(String, String)] = [], body: [UInt8]? = nil) throws -> TestResponse {
        try HTTPTestClient.send(port: port, method, target, headers: headers, body: body)
    }

    /// A request to the admin listener with the admin token.
    public func admin(_ method: String, _ target: String, json: String? = nil) throws -> TestResponse {
        var headers = [("Authorization", "Bearer \(adminToken)")]
        if json != nil { headers.append(("Content-Type", "application/json")) }
        return try HTTPTestClient.send(port: adminPort, method, target, headers: headers, body: json.map { Array($0.utf8) })
    }

    public func logText() -> String {
        (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
    }

    public func accessLogText() -> String {
        (try? String(contentsOfFile: accessLogPath, encoding: .utf8)) ?? ""
    }

    /// `Tests/Fixtures/<name>` of this package.
    public static func fixturePath(_ name: String) -> String {
        var url = URL(fileURLWithPath: #filePath)
        while url.path != "/" {
            url.deleteLastPathComponent()
            if FileManager.default.fileExists(atPath: url.appendingPathComponent("Package.swift").path) {
                return url.appendingPathComponent("Tests/Fixtures/" + name).path
            }
        }
        return "Tests/Fixtures/" + name
    }
}

/// Polls `condition` every 20 ms until it holds or `seconds` pass.
public func eventually(_ seconds: Double = 5, _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if try condition() { return true }
        usleep(20_000)
    }
    return try condition()
}

extension TestGateway {
    /// `PUT /admin/v1/tenants/{appId}/keys/{keyId}` (keyId given in standard base64).
    public func importKey(appID: String, keyID: String, publicKey: String, counter: Int) throws -> TestResponse {
        let pathKeyID = keyID.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
        let body = try JSONSerialization.data(withJSONObject: ["publicKey": publicKey, "counter": counter])
        return try admin("PUT", "/admin/v1/tenants/\(appID)/keys/\(pathKeyID)", json: String(decoding: body, as: UTF8.self))
    }

    /// Stores `challenge` as issued `ageSeconds` ago, exactly as the challenge endpoint would.
    public func putChallenge(appID: String, challenge: String, ageSeconds: Double = 0) throws {
        let issued = Int64((Date().timeIntervalSince1970 - ageSeconds) * 1000)
        try RedisCLI.run(redisURL, "SET", "ag:{\(appID)}:ch:\(challenge)", String(issued), "PX", "600000")
    }

    /// The stored value of a challenge (issue ms, `used:<ms>`, or empty when unknown).
    public func challengeState(appID: String, challenge: String) throws -> String {
        try RedisCLI.run(redisURL, "GET", "ag:{\(appID)}:ch:\(challenge)")
    }

    /// Deletes every key of a tenant (tests that share a real App ID start clean).
    public func clearTenantKeys(appID: String) throws {
        try RedisCLI.run(redisURL, "EVAL", "for _, k in ipairs(redis.call('KEYS', ARGV[1])) do redis.call('DEL', k) end return 1",
                         "0", "ag:{\(appID)}:*")
    }
}

extension TestGateway {
    /// A product built next to the test bundle (`swift build --build-tests` builds it too).
    public static func builtProductPath(_ name: String) -> String {
        var url = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        while url.path != "/" {
            url.deleteLastPathComponent()
            let candidate = url.appendingPathComponent(name).path
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        return ".build/debug/" + name
    }
}
