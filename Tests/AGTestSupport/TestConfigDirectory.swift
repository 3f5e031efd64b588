import AGConfig
import AGGateway
import Foundation

/// A temporary configuration directory for a gateway under test: `gateway.yaml` with ports chosen
/// by the kernel, fresh signing keys, an admin token, Apple's root CA and the given tenants.
/// Removed with the object.
public final class TestConfigDirectory: @unchecked Sendable {
    // Invariant: immutable after init; the directory is only removed in deinit.
    public let directory: String
    public let adminToken: String
    public var gatewayPath: String { directory + "/gateway.yaml" }

    /// Writes the files. `tenants` maps file names to YAML; `gatewayYAML` adds top-level
    /// sections (they replace the defaults written here when they share a name); `files` maps
    /// names relative to the config directory to contents written before the gateway starts
    /// (a test CA certificate, for example).
    public init(redisURL: String = TestGateway.sharedRedisURL, tenants: [String: String], gatewayYAML: String = "",
                files: [String: String] = [:],
                workers: Int = 2, redisTimeout: String = "250ms", keys: [(kid: String, algorithm: String, active: Bool)] = [("test-es256", "ES256", true)]) throws {
        directory = NSTemporaryDirectory() + "attestgate-test-" + UUID().uuidString
        let manager = FileManager.default
        try manager.createDirectory(atPath: directory + "/tenants", withIntermediateDirectories: true)
        try manager.createDirectory(atPath: directory + "/keys", withIntermediateDirectories: true)
        adminToken = UUID().uuidString + UUID().uuidString
        try adminToken.write(toFile: directory + "/admin-token", atomically: true, encoding: .utf8)
        let rootCA = try TestFile.text(TestGateway.fixturePath("Apple_App_Attestation_Root_CA.pem"))
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
            "ip_limits": "ip_limits:\n  challenge: 1000000\n  validate: 1000000\n  psso_nonce: 1000000\n",
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
    }

    deinit {
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Writes (or replaces) a tenant file, renamed into place as an editor would.
    public func writeTenant(_ name: String, _ yaml: String) throws {
        let temporary = directory + "/tenants/." + name + ".tmp"
        try yaml.write(toFile: temporary, atomically: false, encoding: .utf8)
        rename(temporary, directory + "/tenants/" + name)
    }
}
