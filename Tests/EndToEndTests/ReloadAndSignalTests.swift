import AGSync
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

    /// Reload reads the files with the loader check-config and start use: a proxy key in a
    /// tenant without routes is refused with its line, and the tenant in force stays.
    @Test func aProxyKeyWithoutRoutesIsRefusedByReload() throws {
        let teamID = TestGateway.randomTeamID()
        let gateway = try TestGateway(tenants: ["a.yaml": TestGateway.tenantYAML(teamID: teamID)])
        defer { gateway.stop() }
        try gateway.writeTenant("a.yaml", TestGateway.tenantYAML(teamID: teamID, extra: "upstream: http://127.0.0.1:9\n"))
        let reload = try gateway.admin("POST", "/admin/v1/reload")
        #expect(reload.status == 400)
        #expect(reload.code == "config_invalid")
        #expect(reload.json["hint"] as? String
            == gateway.directory + "/tenants/a.yaml:5: upstream: has no effect without routes; add routes or remove it")
        #expect(try challenge(gateway, teamID: teamID).status == 200)
    }

    /// An admin token file emptied under a running gateway is refused by reload, and the token
    /// in force still opens the admin API (before, the reload went through and every admin
    /// call, the next reload included, answered 401).
    @Test func anEmptiedAdminTokenFileIsRefusedByReload() throws {
        let gateway = try TestGateway(tenants: ["a.yaml": TestGateway.tenantYAML(teamID: TestGateway.randomTeamID())])
        defer { gateway.stop() }
        try "\n".write(toFile: gateway.directory + "/admin-token", atomically: true, encoding: .utf8)
        let reload = try gateway.admin("POST", "/admin/v1/reload")
        #expect(reload.status == 400)
        #expect(reload.code == "config_invalid")
        #expect(reload.json["hint"] as? String == gateway.directory + #"/gateway.yaml:3: admin.token_file: admin token file ""#
            + gateway.directory + #"/admin-token" holds no token, and the admin API would refuse every call; write one into it (openssl rand -hex 32)"#)
        #expect(try gateway.admin("GET", "/admin/v1/tiers").status == 200, "the token in force still opens the admin API")
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

    /// SIGTERM closes the listening sockets at once, as nginx's graceful quit does: a new
    /// connection is refused (a load balancer's health check fails and it retries elsewhere,
    /// where a connection accepted into a backlog nobody reads would be reset at exit), while
    /// the request in flight finishes.
    @Test func sigtermRefusesNewConnectionsWhileTheRequestInFlightFinishes() throws {
        let upstream = try RecordingUpstream()
        defer { upstream.stop() }
        let release = DispatchSemaphore(value: 0)
        upstream.reply { _ in
            release.wait()
            return UpstreamReply(body: Array("finished".utf8))
        }
        let teamID = TestGateway.randomTeamID()
        let harness = try TestGateway(tenants: ["a.yaml": TestGateway.tenantYAML(teamID: teamID, extra: """
            upstream: \(upstream.url)
            routes:
              - prefix: /public
                auth: none
            """)], gatewayYAML: "server:\n  listen: \"127.0.0.1:0\"\n  workers: 2\n  shutdown_grace: 60s\n")
        harness.stop()
        let gateway = try GatewayProcess(configPath: harness.directory + "/gateway.yaml")
        let port = gateway.port, adminPort = gateway.adminPort
        let headers = [("X-Team-ID", teamID), ("X-Bundle-ID", "com.example.app")]
        let answer = Locked<TestResponse?>(nil)
        let failure = Locked<String?>(nil)
        let inFlight = Thread {
            do {
                let response = try HTTPTestClient.send(port: port, "GET", "/public/slow", headers: headers)
                answer.withLock { $0 = response }
            } catch {
                failure.withLock { $0 = "\(error)" }
            }
        }
        inFlight.start()
        #expect(eventually { upstream.records.count == 1 })

        gateway.signal(SIGTERM)
        #expect(eventually { gateway.log.contains("shutting down") })
        // Within the grace period (60 s), with the request still held by the upstream.
        #expect(eventually { Self.connectionRefused(port: port) }, "the public port still accepts connections")
        #expect(eventually { Self.connectionRefused(port: adminPort) }, "the admin port still accepts connections")
        #expect(answer.withLock { $0 } == nil && gateway.isRunning)
        release.signal()
        #expect(eventually { answer.withLock { $0 }?.status == 200 }, "\(String(describing: failure.withLock { $0 })) \(upstream.records.count) \(gateway.log.suffix(3000))")
        #expect(answer.withLock { $0 }?.text == "finished")
        #expect(gateway.waitForExit() == 0, "\(gateway.log.suffix(4000))")
        // The request the drain let finish has its access-log line too: the worker flushed its
        // buffer when its last connection closed, before that request's line was added (an
        // operations sweep, stop 35, counted 0 of 1 to 6 of 8 such lines lost).
        #expect(eventually { gateway.accessLog.contains(#""path":"/public/slow""#) }, "\(gateway.accessLog.suffix(3000))")
        #expect(gateway.accessLog.contains(#""status":200"#))
    }

    /// Whether a TCP connect to 127.0.0.1:`port` is refused (ECONNREFUSED), not accepted.
    static func connectionRefused(port: Int) -> Bool {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        inet_pton(AF_INET, "127.0.0.1", &address.sin_addr)
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        return result != 0 && errno == ECONNREFUSED
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
