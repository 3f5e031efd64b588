import AGTestSupport
import FoundationEssentials
import Testing

@testable import AGConfig
@testable import AGPolicy
@testable import AGGateway

/// Re-reading `tenants/` for a reload, and doing it fast for many tenants.
@Suite struct ConfigReloadTests {
    static func tenantFile(_ index: Int) -> String {
        """
        team_id: ABCDE12345
        bundle_id: com.example.app\(index)
        tier: \(["free", "pro", "business", "enterprise"][index % 4])
        environment: development
        custom_claims: { shard: \(index), region: eu }
        upstream: http://127.0.0.1:\(9_000 + index % 100)
        routes:
          - prefix: /api/
          - { prefix: /public/, auth: none }

        """
    }

    @Test func reloadPicksUpAddedChangedAndRemovedTenants() throws {
        let fixture = try ConfigFixture()
        let first = try ConfigLoader.load(path: fixture.gatewayPath)
        #expect(first.tenants.all.map(\.name) == ["example"])

        try fixture.write("conf/tenants/b.yml", Self.tenantFile(1))
        try fixture.write("conf/tenants/a.yaml", Self.tenantFile(2))
        try fixture.write("conf/tenants/notes.txt", "not a tenant")
        try fixture.write("conf/tenants/.hidden.yaml", "not: [valid")
        let second = try ConfigLoader.reloadTenants(of: first)
        #expect(second.tenants.all.map(\.name) == ["a", "b", "example"])
        #expect(second.tenants.tenant(appID: "ABCDE12345.com.example.app1")?.tier == "pro")
        #expect(first.tenants.all.count == 1)

        try fixture.remove("conf/tenants/example.yaml")
        let third = try ConfigLoader.reloadTenants(of: second)
        #expect(third.tenants.all.map(\.name) == ["a", "b"])
        #expect(third.tenants.tenant(teamID: "ABCDE12345", bundleID: "com.example.app") == nil)
    }

    @Test func invalidReloadThrowsAndLeavesTheSnapshotAlone() throws {
        let fixture = try ConfigFixture()
        let current = try ConfigLoader.load(path: fixture.gatewayPath)
        try fixture.write("conf/tenants/zz.yaml", "team_id: ABCDE12345\nbundle_id: com.example.app\ntier: gold\n")
        #expect(throws: ConfigError(problems: [
            ConfigProblem(file: fixture.root + "/conf/tenants/zz.yaml", line: 2, keyPath: "bundle_id",
                          message: "duplicate App ID ABCDE12345.com.example.app, already defined in \(fixture.root)/conf/tenants/example.yaml:5"),
            ConfigProblem(file: fixture.root + "/conf/tenants/zz.yaml", line: 3, keyPath: "tier",
                          message: #"unknown tier "gold"; defined tiers: business, enterprise, free, pro"#),
        ])) {
            try ConfigLoader.reloadTenants(of: current)
        }
        #expect(current.tenants.all.map(\.name) == ["example"])
    }

    @Test func reloadReportsAMissingTenantsDirectory() throws {
        let fixture = try ConfigFixture()
        let current = try ConfigLoader.load(path: fixture.gatewayPath)
        try fixture.remove("conf/tenants")
        #expect(throws: ConfigError(problems: [
            ConfigProblem(file: fixture.root + "/conf/tenants", line: nil, keyPath: "",
                          message: "tenants directory does not exist"),
        ])) {
            try ConfigLoader.loadTenants(for: current.gateway)
        }
    }

    /// Correctness at scale only; the reload time is measured by scripts/bench, not asserted here.
    @Test func thousandTenantsLoadAndReload() throws {
        let fixture = try ConfigFixture()
        for index in 0..<1_000 {
            try fixture.write("conf/tenants/t\(String(index + 10_000)).yaml", Self.tenantFile(index))
        }
        let config = try ConfigLoader.load(path: fixture.gatewayPath)
        let reloaded = try ConfigLoader.loadTenants(for: config.gateway)
        #expect(config.tenants.all.count == 1_001)
        #expect(reloaded.all.count == 1_001)
        #expect(config.tenants.all.first?.name == "example")
        #expect(config.tenants.all.last?.name == "t10999")
        #expect(config.tenants.tenant(appID: "ABCDE12345.com.example.app777")?.upstream?.port == 9_077)
    }
}
