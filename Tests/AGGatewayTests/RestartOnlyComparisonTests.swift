@testable import AGGateway
import AGConfig
import AGTestSupport
import Testing

/// Which changed settings a reload names as needing a restart (`GatewayShared.restartOnlySettings`).
@Suite struct RestartOnlyComparisonTests {
    static func gateway(redisURL: String) throws -> (TestConfigDirectory, GatewayConfig) {
        let directory = try TestConfigDirectory(redisURL: redisURL, tenants: [
            "t.yaml": TestGateway.tenantYAML(teamID: "ABCDE12345"),
        ])
        return (directory, try ConfigLoader.load(path: directory.gatewayPath).gateway)
    }

    /// A new Redis password is a change of `redis.url` although the URL's logged spelling
    /// (`***` for the password) is the same: an operator rotating it was told nothing (an
    /// operations sweep, stop 35), while the old password stays in use until a restart.
    @Test func aNewRedisPasswordIsARestartOnlyChange() throws {
        let (keepA, one) = try Self.gateway(redisURL: "redis://:first-secret@127.0.0.1:6390/2")
        let (keepB, two) = try Self.gateway(redisURL: "redis://:second-secret@127.0.0.1:6390/2")
        let (keepC, same) = try Self.gateway(redisURL: "redis://:first-secret@127.0.0.1:6390/2")
        // Three directories: `tenants_dir` differs by construction.
        func changed(_ a: GatewayConfig, _ b: GatewayConfig) -> [String] {
            GatewayShared.restartOnlySettings(a, b).filter { $0.1 != $0.2 && $0.0 != "tenants_dir" }.map(\.0)
        }
        withExtendedLifetime((keepA, keepB, keepC)) {
            #expect(changed(one, two) == ["redis.url"])
            #expect(changed(one, same).isEmpty)
            // What is compared is never the password itself.
            for (_, old, new) in GatewayShared.restartOnlySettings(one, two) {
                #expect(!old.contains("secret") && !new.contains("secret"))
            }
        }
    }
}
