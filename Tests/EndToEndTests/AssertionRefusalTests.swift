import AGCrypto
import AGDevice
import AGFormats
import AGHTTP
import AGTestSupport
import Foundation
import Testing

/// Issue 9 item 7, "a keyId is not a weapon": an assertion the stored key did not sign leaves
/// the device record alone (409 `reattest_required`, the device keeps refreshing); only an
/// assertion the stored key signed that then fails the RP ID hash or counter check invalidates
/// it (409, then 404 `not_found`). Real gateway, real Redis, real sockets.
@Suite("refused assertions: who can cost a device its record")
struct AssertionRefusalTests {
    let teamID = TestGateway.randomTeamID()
    let bundleID = "com.example.app"
    var appID: String { "\(teamID).\(bundleID)" }

    func startGateway() throws -> TestGateway {
        try TestGateway(tenants: [
            "a.yaml": TestGateway.tenantYAML(teamID: teamID, bundleID: bundleID),
            "b.yaml": TestGateway.tenantYAML(teamID: teamID, bundleID: "com.example.other"),
        ])
    }

    func session(_ gateway: TestGateway, device: SimulatedDevice) throws -> DeviceSession {
        let configuration = DeviceSessionConfiguration(
            gateway: try HTTPEndpoint(url: "http://127.0.0.1:\(gateway.port)"),
            admin: try HTTPEndpoint(url: "http://127.0.0.1:\(gateway.adminPort)"), adminToken: gateway.adminToken)
        return DeviceSession(configuration: configuration, device: device)
    }

    /// A fresh challenge of tenant `a`, as anyone on the public port can get one.
    func challenge(_ gateway: TestGateway) throws -> String {
        let response = try gateway.send("GET", "/api/v1/attestation/challenge",
                                        headers: [("X-Team-ID", teamID), ("X-Bundle-ID", bundleID)])
        try #require(response.status == 200, "\(response.text)")
        return try #require(response.json["challenge"] as? String)
    }

    /// `POST /api/v1/attestation/refresh` for `keyID` with `assertion` over `challenge`.
    func refresh(_ gateway: TestGateway, keyID: String, challenge: String, assertion: [UInt8]) throws -> TestResponse {
        let fields = ["keyId": keyID, "assertion": Base64.encode(assertion),
                      "clientDataHash": Base64.encode(SHA256.hash(challenge.utf8)), "challenge": challenge]
        return try gateway.send("POST", "/api/v1/attestation/refresh",
                                headers: [("X-Team-ID", teamID), ("X-Bundle-ID", bundleID), ("Content-Type", "application/json")],
                                body: Array(try JSONSerialization.data(withJSONObject: fields)))
    }

    func record(_ gateway: TestGateway, _ device: SimulatedDevice) throws -> TestResponse {
        try gateway.admin("GET", "/admin/v1/tenants/\(appID)/keys/\(device.keyIDForPath)")
    }

    /// Assertion CBOR with the device's authenticator data (its App ID, counter + 1) and any signature.
    func assertion(for device: SimulatedDevice, signature: [UInt8]) -> [UInt8] {
        var authenticatorData = SHA256.hash(device.appID.utf8)
        authenticatorData.append(SimulatedDevice.assertionFlags)
        let counter = device.counter + 1
        authenticatorData += [UInt8(counter >> 24 & 0xFF), UInt8(counter >> 16 & 0xFF), UInt8(counter >> 8 & 0xFF), UInt8(counter & 0xFF)]
        return CBOREncoder().encode(.map([
            (.text("signature"), .bytes(signature)), (.text("authenticatorData"), .bytes(authenticatorData)),
        ]))
    }

    @Test func anAssertionTheStoredKeyDidNotSignKeepsTheRecord() throws {
        let gateway = try startGateway()
        defer { gateway.stop() }
        let device = try session(gateway, device: SimulatedDevice(teamID: teamID, bundleID: bundleID))
        try device.register()
        try device.refresh()
        let keyID = device.device.keyID

        // What an attacker who read the keyId from a token's sub can send: garbage, a
        // well-formed DER signature of nothing, and a genuine assertion made by another key.
        var impostor = try SimulatedDevice(teamID: teamID, bundleID: bundleID)
        let forgeries: [(String, (String) throws -> [UInt8])] = [
            ("garbage signature", { _ in assertion(for: device.device, signature: [UInt8](repeating: 0xAB, count: 70)) }),
            ("DER signature r = s = 1", { _ in assertion(for: device.device, signature: [0x30, 0x06, 0x02, 0x01, 0x01, 0x02, 0x01, 0x01]) }),
            ("empty signature", { _ in assertion(for: device.device, signature: []) }),
            ("signed by another key", { challenge in try impostor.makeAssertion(challenge: challenge).assertion }),
            ("not CBOR", { _ in [0xFF, 0xFF, 0xFF] }),
        ]
        for (name, forge) in forgeries {
            let challenge = try challenge(gateway)
            let response = try refresh(gateway, keyID: keyID, challenge: challenge, assertion: forge(challenge))
            #expect(response.status == 409, "\(name): \(response.text)")
            #expect(response.code == "reattest_required", "\(name)")
            #expect(try gateway.challengeState(appID: appID, challenge: challenge).hasPrefix("used:"), "\(name): challenge spent")
            let stored = try record(gateway, device.device)
            #expect(stored.status == 200, "\(name): the record is kept")
            #expect(stored.json["counter"] as? Int == 1, "\(name): the counter is untouched")
        }
        // The device never noticed: it refreshes as before.
        let token = try device.refresh()
        #expect(!token.token.isEmpty)
        #expect(try record(gateway, device.device).json["counter"] as? Int == 2)
        #expect(eventually { gateway.logText().contains("assertion refused, attestation kept") })
        // Not a line per forgery: anyone who knows the keyId can send them (stop 34, independent
        // sweep: five forgeries wrote five lines). One per tenant and 10 s (two if this loop
        // straddled an interval on a loaded machine).
        let lines = gateway.logText().components(separatedBy: "assertion refused, attestation kept").count - 1
        #expect(lines >= 1 && lines <= 2, "\(lines) lines for \(forgeries.count) forgeries")
        #expect(!gateway.logText().contains("attestation invalidated"))
        let metrics = try gateway.admin("GET", "/metrics").text
        #expect(metrics.contains("attestgate_assertion_refusals_total{kind=\"unsigned\",reason=\"signature_invalid\"} 2"), "\(metrics)")
        #expect(metrics.contains("attestgate_assertion_refusals_total{kind=\"unsigned\",reason=\"signature_malformed\"} 2"))
        #expect(metrics.contains("attestgate_assertion_refusals_total{kind=\"unsigned\",reason=\"assertion_malformed\"} 1"))
    }

    /// The seed's 409 for a key "registered for a different Bundle/Team ID": a key this tenant
    /// does not know, whose assertion names another app, is told to re-attest (a 404 would have
    /// the device attest that key again). The other tenant's record and this tenant's challenge
    /// are untouched; an unknown key naming this app stays 404.
    @Test func aKeyOfAnotherAppIsToldToReattest() throws {
        let gateway = try startGateway()
        defer { gateway.stop() }
        let other = try session(gateway, device: SimulatedDevice(teamID: teamID, bundleID: "com.example.other"))
        try other.register()
        var device = other.device
        let challenge = try challenge(gateway)
        let response = try refresh(gateway, keyID: device.keyID, challenge: challenge,
                                   assertion: device.makeAssertion(challenge: challenge).assertion)
        #expect(response.status == 409, "\(response.text)")
        #expect(response.code == "reattest_required")
        #expect((response.json["error"] as? String)?.contains("another Bundle/Team ID") == true)
        let otherRecord = try gateway.admin("GET", "/admin/v1/tenants/\(teamID).com.example.other/keys/\(device.keyIDForPath)")
        #expect(otherRecord.status == 200 && otherRecord.json["counter"] as? Int == 0, "\(otherRecord.text)")
        #expect(try !gateway.challengeState(appID: appID, challenge: challenge).hasPrefix("used:"))

        let unknown = try SimulatedDevice(teamID: teamID, bundleID: bundleID)
        let notFound = try refresh(gateway, keyID: unknown.keyID, challenge: challenge,
                                   assertion: assertion(for: unknown, signature: []))
        #expect(notFound.status == 404)
        #expect(notFound.code == "not_found")
    }

    @Test func theStoredKeySigningForAnotherAppInvalidatesTheRecord() throws {
        let gateway = try startGateway()
        defer { gateway.stop() }
        let device = try session(gateway, device: SimulatedDevice(teamID: teamID, bundleID: bundleID))
        try device.register()
        // The same key, its RP ID hash computed for another App ID (also served by this gateway).
        var elsewhere = SimulatedDevice(teamID: teamID, bundleID: "com.example.other", privateKey: device.device.privateKey,
                                        counter: device.device.counter)
        let challenge = try challenge(gateway)
        let response = try refresh(gateway, keyID: device.device.keyID, challenge: challenge,
                                   assertion: elsewhere.makeAssertion(challenge: challenge).assertion)
        #expect(response.status == 409, "\(response.text)")
        #expect(response.code == "reattest_required")
        #expect(try record(gateway, device.device).status == 404, "the stored attestation is invalidated")
        let next = try refresh(gateway, keyID: device.device.keyID, challenge: try self.challenge(gateway),
                               assertion: assertion(for: device.device, signature: []))
        #expect(next.status == 404)
        #expect(next.code == "not_found")
        #expect(eventually { gateway.logText().contains("assertion refused, attestation invalidated") })
        #expect(try gateway.admin("GET", "/metrics").text
            .contains("attestgate_assertion_refusals_total{kind=\"signed\",reason=\"rp_id_hash_mismatch\"} 1"))
    }

    @Test func theStoredKeyReplayingACounterInvalidatesTheRecord() throws {
        let gateway = try startGateway()
        defer { gateway.stop() }
        // The gateway has seen counter 5; this copy of the key still thinks it is at 2 (a clone).
        let key = try P256.PrivateKey()
        let ahead = try session(gateway, device: SimulatedDevice(teamID: teamID, bundleID: bundleID, privateKey: key, counter: 5))
        try ahead.register()
        var clone = SimulatedDevice(teamID: teamID, bundleID: bundleID, privateKey: key, counter: 2)
        let challenge = try challenge(gateway)
        let response = try refresh(gateway, keyID: clone.keyID, challenge: challenge,
                                   assertion: clone.makeAssertion(challenge: challenge).assertion)
        #expect(response.status == 409, "\(response.text)")
        #expect(response.code == "reattest_required")
        #expect(try record(gateway, clone).status == 404, "the stored attestation is invalidated")
        let second = try self.challenge(gateway)
        let next = try refresh(gateway, keyID: clone.keyID, challenge: second, assertion: clone.makeAssertion(challenge: second).assertion)
        #expect(next.status == 404)
        #expect(next.code == "not_found")
    }
}
