import AGTestSupport
import AGHTTP
import AGCrypto
import AGDevice
import AGFormats
import Foundation
import Testing

/// A configuration pointing both listeners at one fake gateway server.
private func configuration(_ server: TestHTTPServer, adminToken: String? = FakeGateway.adminToken) throws
    -> DeviceSessionConfiguration {
    let endpoint = try HTTPEndpoint(url: server.url)
    return DeviceSessionConfiguration(gateway: endpoint, admin: endpoint, adminToken: adminToken, timeout: .seconds(5))
}

private func rejection(_ body: () throws(DeviceError) -> Void) -> GatewayRejection? {
    do {
        try body()
    } catch .rejected(let rejection) {
        return rejection
    } catch {
        Issue.record("expected a gateway rejection, got \(error)")
        return nil
    }
    Issue.record("expected a gateway rejection, got success")
    return nil
}

@Test("register, challenge, refresh and a proxied call follow the contract end to end")
func sessionHappyPath() throws {
    let gateway = try FakeGateway()
    let server = try gateway.serve()
    defer { server.stop() }
    let device = try SimulatedDevice(teamID: gateway.teamID, bundleID: gateway.bundleID)
    let session = DeviceSession(configuration: try configuration(server), device: device)

    let registration = try session.register()
    #expect(registration.status == 201)
    #expect(registration.keyID == device.keyID)
    #expect(registration.appID == "ABCDE12345.com.example.app")
    #expect(gateway.counter(keyID: device.keyID) == 0)

    let challenge = try session.challenge()
    #expect(challenge.value.count == 64)
    #expect(challenge.ttl == 300)

    let subject = "9f1c2e34-0000-4000-8000-000000000001"
    let token = try session.refresh(with: challenge, subjectID: subject)
    #expect(gateway.counter(keyID: device.keyID) == 1)
    #expect(gateway.subject(keyID: device.keyID) == subject)
    #expect(session.device.counter == 1)
    #expect(token.expiresAt == "2030-01-01T00:00:00Z")
    #expect(token.redacted == String(token.token.prefix(16)) + "…")
    let (header, claims) = try token.decoded()
    #expect(header["alg"] == "ES256")
    #expect(header["kid"] == "test-1")
    #expect(claims["sub"]?.stringValue == device.keyID)
    #expect(claims["subject_id"]?.stringValue == subject)

    // Another refresh fetches its own challenge and advances the counter again.
    try session.refresh()
    #expect(gateway.counter(keyID: device.keyID) == 2)

    let response = try session.call(path: "/api/hello", method: "POST", body: Array("{\"x\":1}".utf8))
    #expect(response.status == 200)
    let body = try JSONValue(parsing: response.body)
    #expect(body["hello"]?.stringValue == device.keyID)
    #expect(body["method"] == "POST")
    #expect(body["body"] == 7)

    // An error from a proxied route is reported with the request, without the re-register hint.
    let missing = rejection { () throws(DeviceError) in _ = try session.call(path: "/nowhere") }
    #expect(missing?.request == "GET /nowhere")
    #expect(missing?.requiresNewKey == false)
}

@Test("gateway error envelopes surface as typed rejections with status, code and message")
func sessionRejections() throws {
    let gateway = try FakeGateway()
    let server = try gateway.serve()
    defer { server.stop() }
    let config = try configuration(server)

    // Unknown tenant.
    let stranger = DeviceSession(configuration: config, device: try SimulatedDevice(teamID: "ZZZZZ99999", bundleID: "x.y"))
    let unknown = rejection { () throws(DeviceError) in _ = try stranger.challenge() }
    #expect(unknown == GatewayRejection(status: 401, code: "unknown_tenant", message: "unknown tenant", requestID: "req-1",
                                        request: "GET /api/v1/attestation/challenge"))
    #expect(unknown?.requiresNewKey == false)

    // Refresh before registering: no such key.
    let session = DeviceSession(configuration: config, device: try SimulatedDevice(teamID: gateway.teamID,
                                                                                    bundleID: gateway.bundleID))
    let notFound = rejection { () throws(DeviceError) in try session.refresh() }
    #expect(notFound?.code == "not_found")
    #expect(notFound?.requiresNewKey == true)
    #expect(rejection { () throws(DeviceError) in try session.refresh() }?.status == 404)

    // A challenge is single use.
    try session.register()
    let challenge = try session.challenge()
    try session.refresh(with: challenge)
    let reused = rejection { () throws(DeviceError) in try session.refresh(with: challenge) }
    #expect(reused?.status == 400)
    #expect(reused?.code == "challenge_already_used")

    // Wrong admin token.
    let intruder = DeviceSession(configuration: try configuration(server, adminToken: "wrong"),
                                 device: try SimulatedDevice(teamID: gateway.teamID, bundleID: gateway.bundleID))
    #expect(rejection { () throws(DeviceError) in try intruder.register() }?.code == "unauthorized")

    // Missing admin settings are reported before anything is sent.
    let noAdmin = DeviceSession(configuration: DeviceSessionConfiguration(gateway: config.gateway),
                                device: session.device)
    #expect(throws: DeviceError.self) { try noAdmin.register() }

    // A non-envelope error body still yields a rejection.
    let plain = GatewayRejection(response: HTTPClientResponse(status: 502, headers: [("X-Request-ID", "r9")],
                                                              body: Array("Bad Gateway".utf8)))
    #expect(plain == GatewayRejection(status: 502, code: "http_502", message: "Bad Gateway", requestID: "r9"))
}

@Test("a device whose counter fell behind the gateway's is told to re-attest")
func staleCounterRejected() throws {
    let gateway = try FakeGateway()
    let server = try gateway.serve()
    defer { server.stop() }
    let config = try configuration(server)
    let device = try SimulatedDevice(teamID: gateway.teamID, bundleID: gateway.bundleID)
    let session = DeviceSession(configuration: config, device: device)
    try session.register()
    try session.refresh()
    try session.refresh()
    // A copy of the device as it was before those refreshes (a state file restored from backup).
    let stale = DeviceSession(configuration: config, device: device)
    let rejected = rejection { () throws(DeviceError) in try stale.refresh() }
    #expect(rejected?.status == 409)
    #expect(rejected?.code == "reattest_required")
    #expect(rejected?.requiresNewKey == true)
    #expect(rejected?.description.contains("register again") == true)
}

@Test("an expired token is refreshed once and the call retried")
func expiredTokenRefreshed() throws {
    let gateway = try FakeGateway()
    let server = try gateway.serve()
    defer { server.stop() }
    let session = DeviceSession(configuration: try configuration(server),
                                device: try SimulatedDevice(teamID: gateway.teamID, bundleID: gateway.bundleID))
    try session.register()
    gateway.mintExpiredTokens.store(true, ordering: .sequentiallyConsistent)
    try session.refresh()
    gateway.mintExpiredTokens.store(false, ordering: .sequentiallyConsistent)
    #expect(try session.call(path: "/api/hello").status == 200)
    #expect(session.device.counter == 2)

    // When the fresh token is expired too, the rejection is reported rather than looping.
    gateway.mintExpiredTokens.store(true, ordering: .sequentiallyConsistent)
    try session.refresh()
    #expect(rejection { () throws(DeviceError) in _ = try session.call(path: "/api/hello") }?.code == "token_expired")
    #expect(session.device.counter == 4)
}

@Test("a session with a state path saves the counter before each assertion leaves, so runs continue it")
func sessionPersistsState() throws {
    let gateway = try FakeGateway()
    let server = try gateway.serve()
    defer { server.stop() }
    let directory = NSTemporaryDirectory() + "agdevice-\(UUID().uuidString)"
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let path = directory + "/device.json"
    let config = try configuration(server)

    let (first, origin) = try DeviceSession.open(configuration: config, statePath: path, teamID: nil, bundleID: nil,
                                                 defaultTeamID: gateway.teamID, defaultBundleID: gateway.bundleID,
                                                 creatingIfMissing: true)
    guard case .registered(let registration) = origin else {
        Issue.record("expected a new registration, got \(origin)")
        return
    }
    #expect(registration.counter == 0)
    try first.refresh()
    #expect(try SimulatedDevice.load(from: path)?.counter == 1)

    // A second run (a new process in the CLI) continues from the saved counter.
    let (second, secondOrigin) = try DeviceSession.open(configuration: config, statePath: path, teamID: nil,
                                                        bundleID: nil, defaultTeamID: "IGNORED", defaultBundleID: "x",
                                                        creatingIfMissing: false)
    #expect(secondOrigin == .stateFile)
    #expect(second.device.keyID == first.device.keyID)
    try second.refresh()
    #expect(gateway.counter(keyID: second.device.keyID) == 2)
    #expect(try SimulatedDevice.load(from: path)?.counter == 2)

    // Options that contradict the saved device are refused.
    #expect(throws: DeviceError.self) {
        try DeviceSession.open(configuration: config, statePath: path, teamID: "OTHER12345", bundleID: nil,
                               defaultTeamID: gateway.teamID, defaultBundleID: gateway.bundleID, creatingIfMissing: true)
    }
    // Without a state file and without permission to create one, nothing is registered.
    #expect(throws: DeviceError.self) {
        try DeviceSession.open(configuration: config, statePath: directory + "/none.json", teamID: nil, bundleID: nil,
                               defaultTeamID: gateway.teamID, defaultBundleID: gateway.bundleID, creatingIfMissing: false)
    }
}

@Test("the state is not written when registration fails")
func failedRegistrationLeavesNoState() throws {
    let gateway = try FakeGateway()
    let server = try gateway.serve()
    defer { server.stop() }
    let directory = NSTemporaryDirectory() + "agdevice-\(UUID().uuidString)"
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let path = directory + "/device.json"
    #expect(throws: DeviceError.self) {
        try DeviceSession.open(configuration: try configuration(server, adminToken: "wrong"), statePath: path,
                               teamID: nil, bundleID: nil, defaultTeamID: gateway.teamID,
                               defaultBundleID: gateway.bundleID, creatingIfMissing: true)
    }
    #expect(!FileManager.default.fileExists(atPath: path))
}

@Test("the load generator registers its devices and completes cycles over one connection per thread")
func loadGenerator() throws {
    let gateway = try FakeGateway()
    let server = try gateway.serve()
    defer { server.stop() }
    let generator = LoadGenerator(configuration: try configuration(server), teamID: gateway.teamID,
                                  bundleID: gateway.bundleID, devices: 5, concurrency: 2, duration: .milliseconds(400))
    var lines: [String] = []
    let report = try generator.run { lines.append($0) }
    #expect(lines.count == 2)
    #expect(report.devices == 5)
    #expect(report.concurrency == 2)
    #expect(report.refreshes > 0)
    #expect(report.errors.isEmpty, "\(report.errors)")
    #expect(report.connectionsOpened == 2)
    #expect(report.cycleLatency.count == report.refreshes)
    #expect(report.challengeLatency.p50 <= report.challengeLatency.p99)
    #expect(report.refreshLatency.p99 <= report.refreshLatency.max)
    #expect(report.description.contains("refreshes ok \(report.refreshes)"))

    // Concurrency above the device count is capped.
    let capped = LoadGenerator(configuration: try configuration(server), teamID: gateway.teamID,
                                    bundleID: gateway.bundleID, devices: 1, concurrency: 4, duration: .milliseconds(50))
    #expect(capped.concurrency == 1)
}

@Test("load errors are counted by envelope code, transport failures by kind")
func loadErrorsCounted() throws {
    let server = try TestHTTPServer { request in
        if request.path.hasPrefix("/admin/") { return .response(status: 204) }
        return .response(status: 429, headers: [("Content-Type", "application/json")],
                         body: Array("{\"error\":\"slow down\",\"code\":\"rate_limited\",\"requestId\":\"r\"}".utf8))
    }
    defer { server.stop() }
    let report = try LoadGenerator(configuration: try configuration(server), teamID: "ABCDE12345",
                                   bundleID: "com.example.app", devices: 2, concurrency: 2,
                                   duration: .milliseconds(200)).run()
    #expect(report.refreshes == 0)
    #expect((report.errors["rate_limited"] ?? 0) > 0)
    #expect(report.errors.keys.sorted() == ["rate_limited"])

    let refusing = RefusingPort()
    let refused = try HTTPEndpoint(url: "http://127.0.0.1:\(refusing.port)")
    var config = try configuration(server)
    config.gateway = refused
    let down = try LoadGenerator(configuration: config, teamID: "ABCDE12345", bundleID: "com.example.app",
                                 devices: 1, concurrency: 1, duration: .milliseconds(100)).run()
    #expect(down.refreshes == 0)
    #expect(down.errors.keys.sorted() == ["connection_refused"])
    withExtendedLifetime(refusing) {}
}

@Test("latency percentiles use nearest rank")
func latencyPercentiles() {
    let samples = (1...100).map { Duration.milliseconds($0) }.shuffled()
    let summary = LatencySummary(samples)
    #expect(summary.count == 100)
    #expect(summary.p50 == .milliseconds(50))
    #expect(summary.p99 == .milliseconds(99))
    #expect(summary.max == .milliseconds(100))
    #expect(LatencySummary([]).p99 == .zero)
    #expect(LatencySummary([.milliseconds(7)]).p50 == .milliseconds(7))
}

@Test("pretty JSON indents nested values with sorted keys")
func prettyJSON() throws {
    let value = try JSONValue(parsing: "{\"b\":[1,{\"c\":\"x\\\"y\"}],\"a\":{},\"d\":[]}")
    #expect(value.prettyPrinted() == """
        {
          "a": {},
          "b": [
            1,
            {
              "c": "x\\"y"
            }
          ],
          "d": []
        }
        """)
}
