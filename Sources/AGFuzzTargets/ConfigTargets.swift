import AGConfig
import AGCrypto
import Foundation

/// The whole configuration loader on a real directory: YAML parsing, strict decoding, file
/// references, tenant files. One target fuzzes `gateway.yaml` beside a fixed tenant, the other
/// a tenant file beside a fixed `gateway.yaml`.
enum ConfigTargets {
    /// A private directory with everything a configuration may refer to.
    static let directory: String = {
        let directory = NSTemporaryDirectory() + "attestgate-fuzz-config-\(getpid())"
        let manager = FileManager.default
        try? manager.removeItem(atPath: directory)
        try! manager.createDirectory(atPath: directory + "/tenants", withIntermediateDirectories: true)
        try! manager.createDirectory(atPath: directory + "/keys", withIntermediateDirectories: true)
        try! FuzzFixtures.tokenKey.pemRepresentation().write(toFile: directory + "/keys/k1.pem", atomically: false, encoding: .utf8)
        try! "not a certificate, only checked to exist\n".write(toFile: directory + "/root-ca.pem", atomically: false, encoding: .utf8)
        try! "fuzz-admin-token\n".write(toFile: directory + "/admin-token", atomically: false, encoding: .utf8)
        return directory
    }()

    static let gatewaySeed = """
        server:
          listen: "127.0.0.1:8080"
          workers: 2
          max_body_bytes: 64KiB
          timeouts: { read: 30s, write: 30s, idle: 60s, upstream_connect: 2s, upstream_response: 30s }
          trusted_proxies: [10.0.0.0/8, "fd00::/8"]
        admin: { listen: "127.0.0.1:9901", token_file: admin-token }
        redis: { url: "redis://:secret@127.0.0.1:6379/2", timeout: 250ms }
        tokens:
          issuer: https://attestgate.example.com
          ttl: 1h
          keys:
            - { kid: k1, algorithm: ES256, file: keys/k1.pem, active: true }
        challenge: { ttl: 5m }
        tiers:
          free: { attest: 30 }
          gold: { attest: 1, challenge: 2, api: 3, mad_limit: unlimited }
        ip_limits: { challenge: 120, validate: 30 }
        rate_limits: { on_store_error: local }
        quotas: { grace: 7d, warn_ratio: 0.8 }
        app_attest: { root_ca: root-ca.pem, allow_test_ca: false }
        tenants_dir: tenants
        log: { format: json, level: info, access_log: true }

        """

    static let tenantSeed = """
        team_id: ABCDE12345
        bundle_id: com.example.app
        tier: free
        environment: development
        token: { audience: aud, ttl: 10m, header: X-Token }
        custom_claims: { plan: beta, features: [a, b], nested: { x: 1 } }
        upstream: http://127.0.0.1:9000/v2
        routes:
          - { prefix: /api/, auth: required }
          - prefix: /public/
            auth: none
        forward:
          claims: { sub: X-Device, custom_claims.plan: X-Plan }
          payload_header: X-Attest-Claims
          forward_authorization: false
        platform_sso:
          path_prefix: /psso
          client_id: c1
          audience: [https://gw.example/psso/token]
          nonce_ttl: 5m

        """

    static let gateway = FuzzTarget(
        name: "config-gateway", summary: "ConfigLoader.load on a fuzzed gateway.yaml (whole loader, real files)",
        seeds: { [gatewaySeed.bytes, "tokens: {issuer: x, keys: [{kid: a, file: keys/k1.pem}]}\n".bytes, "{".bytes, "a: &x [*x]".bytes] }
    ) { input in
        load(gatewayYAML: input, tenantYAML: tenantSeed.bytes)
    }

    static let tenant = FuzzTarget(
        name: "config-tenant", summary: "ConfigLoader.load on a fuzzed tenant file beside a fixed gateway.yaml",
        seeds: { [tenantSeed.bytes, "team_id: ABCDE12345\nbundle_id: b\n".bytes, "- a\n- b".bytes] }
    ) { input in
        load(gatewayYAML: gatewaySeed.bytes, tenantYAML: input)
    }

    /// Loads the directory; every problem must name one of its files, with a line inside it.
    static func load(gatewayYAML: [UInt8], tenantYAML: [UInt8]) -> String? {
        let gatewayPath = directory + "/gateway.yaml"
        let tenantPath = directory + "/tenants/t.yaml"
        guard FileManager.default.createFile(atPath: gatewayPath, contents: Data(gatewayYAML)),
              FileManager.default.createFile(atPath: tenantPath, contents: Data(tenantYAML)) else {
            return nil
        }
        let lineCounts = [gatewayPath: gatewayYAML.count { $0 == 0x0A } + 1, tenantPath: tenantYAML.count { $0 == 0x0A } + 1]
        do {
            _ = try ConfigLoader.load(path: gatewayPath)
        } catch {
            for problem in error.problems {
                guard let line = problem.line else { continue }
                // A problem in another file (a tenants_dir pointed elsewhere) is judged by its own file.
                guard let count = lineCounts[problem.file] else { continue }
                if line < 1 || line > count { return "problem at \(problem.file):\(line) outside its \(count) lines: \(problem)" }
            }
            if error.problems.isEmpty { return "a refused configuration without a problem" }
        }
        return nil
    }
}
