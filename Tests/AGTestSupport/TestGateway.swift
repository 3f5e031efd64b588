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
    /// The configuration files the gateway serves (removed when the test gateway goes).
    public let config: TestConfigDirectory
    public let gateway: Gateway
    public let adminToken: String
    public let redisURL: String
    public var port: Int { gateway.publicPort }
    public var adminPort: Int { gateway.adminPort }
    /// The time the gateway decides by (the host clock unless the test passed a `ManualTime`).
    public let time: any TimeSource
    public let logPath: String
    public let accessLogPath: String
    /// The time the test passed (nil: the gateway's own, aligned with Redis).
    private let givenTime: (any TimeSource)?

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

    /// Starts a gateway on a fresh `TestConfigDirectory` (see there for the parameters).
    public init(redisURL: String = TestGateway.sharedRedisURL, tenants: [String: String], gatewayYAML: String = "",
                files: [String: String] = [:],
                workers: Int = 2, redisTimeout: String = "250ms", keys: [(kid: String, algorithm: String, active: Bool)] = [("test-es256", "ES256", true)],
                time: (any TimeSource)? = nil) throws {
        config = try TestConfigDirectory(redisURL: redisURL, tenants: tenants, gatewayYAML: gatewayYAML, files: files,
                                         workers: workers, redisTimeout: redisTimeout, keys: keys)
        directory = config.directory
        self.redisURL = redisURL
        self.time = time ?? SystemTime()
        adminToken = config.adminToken
        logPath = directory + "/gateway.log"
        accessLogPath = directory + "/access.log"
        givenTime = time
        gateway = try Self.start(config, logPath: logPath, accessLogPath: accessLogPath, time: time)
    }

    /// Another instance on the same configuration files (tenants, token keys, Redis), on ports
    /// of its own: the second instance of a deployment, or one started later. Its logs are
    /// `<name>.log` and `<name>-access.log`.
    public init(sameConfigAs other: TestGateway, name: String) throws {
        config = other.config
        directory = other.directory
        redisURL = other.redisURL
        time = other.time
        adminToken = other.adminToken
        logPath = directory + "/\(name).log"
        accessLogPath = directory + "/\(name)-access.log"
        givenTime = other.givenTime
        gateway = try Self.start(config, logPath: logPath, accessLogPath: accessLogPath, time: givenTime)
    }

    private static func start(_ config: TestConfigDirectory, logPath: String, accessLogPath: String,
                              time: (any TimeSource)?) throws -> Gateway {
        let logFD = open(logPath, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        let accessFD = open(accessLogPath, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        return try Gateway(configPath: config.gatewayPath,
                           logger: Logger(level: .debug, format: .json, fileDescriptor: logFD),
                           accessLog: Logger(level: .info, format: .json, fileDescriptor: accessFD), time: time)
    }

    public func stop() {
        gateway.shutdown()
    }

    /// Writes (or replaces) a tenant file.
    public func writeTenant(_ name: String, _ yaml: String) throws {
        try config.writeTenant(name, yaml)
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
        TestFile.textIfReadable(logPath)
    }

    public func accessLogText() -> String {
        TestFile.textIfReadable(accessLogPath)
    }

    /// The access-log line of the request with `X-Request-ID: requestID`, parsed, once it has
    /// been written (lines go out in batches), or nil after `seconds`.
    public func accessLogEntry(requestID: String, within seconds: Double = 5) -> [String: Any]? {
        var entry: [String: Any]?
        _ = eventually(seconds) {
            entry = accessLogText().split(separator: "\n").first { $0.contains("\"requestId\":\"\(requestID)\"") }
                .flatMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
            return entry != nil
        }
        return entry
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
        let issued = time.nowMilliseconds - Int64(ageSeconds * 1000)
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
