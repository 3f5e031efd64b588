import AGTestSupport
import Foundation
import Testing

@Suite("configuration reload and process signals, end to end")
struct ReloadAndSignalTests {
    func challenge(_ gateway: TestGateway, teamID: String) throws -> TestResponse {
        try gateway.send("GET", "/api/v1/attestation/challenge", headers: [("X-Team-ID", teamID), ("X-Bundle-ID", "com.example.app")])
    }

    @Test func aNewTenantFileIsServedWithoutARestart() throws {
        let first = TestGateway.randomTeamID()
        let gateway = try TestGateway(tenants: ["a.yaml": TestGateway.tenantYAML(teamID: first)])
        defer { gateway.stop() }
        let second = TestGateway.randomTeamID()
        #expect(try challenge(gateway, teamID: second).code == "unknown_tenant")
        try gateway.writeTenant("b.yaml", TestGateway.tenantYAML(teamID: second))
        #expect(try eventually(5) { try challenge(gateway, teamID: second).status == 200 }, "picked up by the tenants/ watcher")
        let stillServed = try challenge(gateway, teamID: first)
        #expect(stillServed.status == 200, "\(stillServed.text) \(gateway.logText())")
    }

    /// A Kubernetes ConfigMap volume: each file is a symlink through `..data`, and an update
    /// writes a new directory and repoints `..data` at it in one rename. The links never change,
    /// only what they lead to (the watcher compared the links' own attributes and missed it).
    @Test func aConfigMapStyleUpdateIsPickedUp() throws {
        let first = TestGateway.randomTeamID(), second = TestGateway.randomTeamID(), third = TestGateway.randomTeamID()
        let gateway = try TestGateway(tenants: ["a.yaml": TestGateway.tenantYAML(teamID: first)])
        defer { gateway.stop() }
        let tenants = gateway.config.directory + "/tenants"
        let files = FileManager.default
        func publish(_ version: String, teamID: String) throws {
            try files.createDirectory(atPath: tenants + "/" + version, withIntermediateDirectories: false)
            try TestGateway.tenantYAML(teamID: teamID).write(toFile: tenants + "/" + version + "/b.yaml", atomically: false,
                                                             encoding: .utf8)
            try files.createSymbolicLink(atPath: tenants + "/..data_tmp", withDestinationPath: version)
            #expect(rename(tenants + "/..data_tmp", tenants + "/..data") == 0)
        }
        try publish("..2026_12_02_1", teamID: second)
        try files.createSymbolicLink(atPath: tenants + "/b.yaml", withDestinationPath: "..data/b.yaml")
        #expect(try eventually(5) { try challenge(gateway, teamID: second).status == 200 }, "a new linked file is picked up")

        try publish("..2026_12_02_2", teamID: third)
        #expect(try eventually(5) { try challenge(gateway, teamID: third).status == 200 }, "the repointed ..data is picked up")
        #expect(try challenge(gateway, teamID: second).code == "unknown_tenant")
        #expect(try challenge(gateway, teamID: first).status == 200)
    }

    @Test func aBrokenTenantFileLeavesTheOldConfigurationServing() throws {
        let teamID = TestGateway.randomTeamID()
        let gateway = try TestGateway(tenants: ["a.yaml": TestGateway.tenantYAML(teamID: teamID)])
        defer { gateway.stop() }
        try gateway.writeTenant("a.yaml", TestGateway.tenantYAML(teamID: teamID) + "\nroutes: maybe\n")
        let reload = try gateway.admin("POST", "/admin/v1/reload")
        #expect(reload.status == 400)
        #expect(reload.code == "config_invalid")
        #expect((reload.json["hint"] as? String)?.contains("a.yaml:") == true)
        #expect(try challenge(gateway, teamID: teamID).status == 200)
        #expect(try eventually { gateway.logText().contains("configuration rejected") && gateway.logText().contains("a.yaml:") })

        try gateway.writeTenant("a.yaml", TestGateway.tenantYAML(teamID: teamID))
        let fixed = try gateway.admin("POST", "/admin/v1/reload")
        #expect(fixed.status == 200)
        #expect((fixed.json["generation"] as? Int ?? 0) > 1)
    }

    @Test func removingATenantFileStopsServingIt() throws {
        let keep = TestGateway.randomTeamID()
        let drop = TestGateway.randomTeamID()
        let gateway = try TestGateway(tenants: ["keep.yaml": TestGateway.tenantYAML(teamID: keep),
                                                "drop.yaml": TestGateway.tenantYAML(teamID: drop)])
        defer { gateway.stop() }
        #expect(try challenge(gateway, teamID: drop).status == 200)
        try FileManager.default.removeItem(atPath: gateway.directory + "/tenants/drop.yaml")
        #expect(try gateway.admin("POST", "/admin/v1/reload").status == 200)
        #expect(try challenge(gateway, teamID: drop).code == "unknown_tenant")
        #expect(try challenge(gateway, teamID: keep).status == 200)
    }

    /// The real executable: SIGHUP with a broken file keeps serving; SIGTERM exits 0.
    @Test func executableHandlesSIGHUPAndSIGTERM() throws {
        let teamID = TestGateway.randomTeamID()
        // Borrow a harness directory for the config, then run the binary on it.
        let harness = try TestGateway(tenants: ["a.yaml": TestGateway.tenantYAML(teamID: teamID)], workers: 1)
        harness.stop()
        let gateway = try GatewayProcess(configPath: harness.directory + "/gateway.yaml")
        let port = gateway.port
        let headers = [("X-Team-ID", teamID), ("X-Bundle-ID", "com.example.app")]
        #expect(try HTTPTestClient.send(port: port, "GET", "/api/v1/attestation/challenge", headers: headers).status == 200)

        try (TestGateway.tenantYAML(teamID: teamID) + "\nbogus: 1\n").write(toFile: harness.directory + "/tenants/a.yaml", atomically: true, encoding: .utf8)
        gateway.signal(SIGHUP)
        #expect(eventually(5) { gateway.log.contains("\"trigger\":\"SIGHUP\"") && gateway.log.contains("bogus") })
        #expect(try HTTPTestClient.send(port: port, "GET", "/api/v1/attestation/challenge", headers: headers).status == 200)

        gateway.signal(SIGTERM)
        #expect(gateway.waitForExit() == 0, "\(gateway.log.suffix(4000))")
        #expect(throws: (any Error).self) { try HTTPTestClient.send(port: port, "GET", "/healthz") }
    }
}
