import AGDevice
import AGHTTP
import AGFormats
import AGTestSupport
import Foundation
import Testing

/// The bundled device client against the real gateway: the README quick start's path.
@Suite("device client against the gateway, end to end")
struct DeviceClientTests {
    let teamID = TestGateway.randomTeamID()

    func session(_ gateway: TestGateway) throws -> DeviceSession {
        let configuration = DeviceSessionConfiguration(
            gateway: try HTTPEndpoint(url: "http://127.0.0.1:\(gateway.port)"),
            admin: try HTTPEndpoint(url: "http://127.0.0.1:\(gateway.adminPort)"), adminToken: gateway.adminToken)
        return DeviceSession(configuration: configuration, device: try SimulatedDevice(teamID: teamID, bundleID: "com.example.app"))
    }

    func claims(_ token: IssuedToken) throws -> [String: JSONValue] {
        try #require(token.decoded().claims.objectValue)
    }

    @Test func registerRefreshSubjectsAndSubscriptions() throws {
        let gateway = try TestGateway(tenants: ["a.yaml": TestGateway.tenantYAML(teamID: teamID, tier: "free", extra: "custom_claims:\n  plan: beta\n")])
        defer { gateway.stop() }
        let device = try session(gateway)
        try device.register()
        let first = try claims(device.refresh())
        #expect(first["sub"]?.stringValue == device.device.keyID)
        #expect(first["subject_id"] == nil)
        #expect(first["custom_claims"]?["plan"]?.stringValue == "beta")
        #expect(first["custom_claims"]?["subscription"] == nil)

        let subject = UUID().uuidString.lowercased()
        let subscription = #"{"tier":"gold","status":"active","is_active":true,"expires_at":"2027-01-01T00:00:00Z"}"#
        let set = try gateway.admin("PUT", "/admin/v1/tenants/\(teamID).com.example.app/subjects/\(subject)/subscription", json: subscription)
        #expect(set.status == 200)

        let linked = try claims(device.refresh(subjectID: subject))
        #expect(linked["subject_id"]?.stringValue == subject)
        #expect(linked["custom_claims"]?["subscription"]?["tier"]?.stringValue == "gold")
        #expect(linked["custom_claims"]?["plan"]?.stringValue == "beta")

        // Without subjectId the device keeps its link, and the subscription still rides the token.
        let kept = try claims(device.refresh())
        #expect(kept["subject_id"]?.stringValue == subject)
        #expect(kept["custom_claims"]?["subscription"]?["is_active"]?.boolValue == true)

        // Claims without a value are omitted, never null: a lifetime subscription's null
        // `expires_at` is left out when stored (the answer shows what tokens will carry), and
        // so are null members deeper down; null array elements are values and stay.
        let lifetime = #"{"tier":"gold","expires_at":null,"meta":{"store":null,"trial":false},"history":[null,1]}"#
        let setLifetime = try gateway.admin("PUT", "/admin/v1/tenants/\(teamID).com.example.app/subjects/\(subject)/subscription",
                                            json: lifetime)
        #expect(setLifetime.status == 200)
        #expect(setLifetime.text.contains("null,1") && !setLifetime.text.contains("expires_at") && !setLifetime.text.contains("store"),
                "\(setLifetime.text)")
        let withoutNulls = try #require(claims(device.refresh())["custom_claims"]?["subscription"])
        #expect(withoutNulls == JSONValue.object(["tier": "gold", "meta": ["trial": false], "history": [.null, 1]]))
        // One stored before that rule (straight in Redis here) is cleaned when a token is issued.
        _ = try RedisCLI.run(gateway.redisURL, ["SET", "ag:{\(teamID).com.example.app}:subj:\(subject)", #"{"tier":"gold","expires_at":null}"#])
        #expect(try claims(device.refresh())["custom_claims"]?["subscription"] == JSONValue.object(["tier": "gold"]))

        let record = try gateway.admin("GET", "/admin/v1/tenants/\(teamID).com.example.app/keys/\(device.device.keyIDForPath)")
        #expect(record.status == 200)
        #expect(record.json["counter"] as? Int == 5)
        #expect(record.json["subjectId"] as? String == subject)
        #expect(record.json["revoked"] as? Bool == false)
        #expect(record.text.contains("BEGIN") == false, "no private material")

        let usage = try gateway.admin("GET", "/admin/v1/tenants/\(teamID).com.example.app/usage")
        #expect(usage.json["activeDevices"] as? Int == 1)
        #expect(usage.json["limit"] as? Int == 1000)
        let month = try #require(usage.json["month"] as? String)
        #expect(month.count == 7 && month.dropFirst(4).first == "-", "YYYY-MM: \(month)")
        // The tenant view shows the same month the same way.
        let shown = try gateway.admin("GET", "/admin/v1/tenants/\(teamID).com.example.app")
        #expect((shown.json["usage"] as? [String: Any])?["month"] as? String == month, "\(shown.text)")

        #expect(try gateway.admin("POST", "/admin/v1/tenants/\(teamID).com.example.app/keys/\(device.device.keyIDForPath)/revoke").status == 200)
        #expect(throws: DeviceError.self) { try device.refresh() }
    }

    @Test func adminKeyImportValidation() throws {
        let gateway = try TestGateway(tenants: ["a.yaml": TestGateway.tenantYAML(teamID: teamID)])
        defer { gateway.stop() }
        let device = try SimulatedDevice(teamID: teamID, bundleID: "com.example.app")
        let appID = "\(teamID).com.example.app"
        let publicKey = Data(device.publicKeyX963).base64EncodedString()
        let other = try SimulatedDevice(teamID: teamID, bundleID: "com.example.app")
        let cases: [(String, String, Int, String)] = [
            (device.keyIDForPath, #"{"publicKey":"\#(publicKey)","counter":0}"#, 200, ""),
            (other.keyIDForPath, #"{"publicKey":"\#(publicKey)"}"#, 400, "key_id_invalid"),
            ("not-a-key-id", #"{"publicKey":"\#(publicKey)"}"#, 400, "key_id_invalid"),
            (device.keyIDForPath, #"{"publicKey":"AAAA"}"#, 400, "bad_request"),
            (device.keyIDForPath, #"{"publicKey":"\#(publicKey)","counter":-1}"#, 400, "bad_request"),
            (device.keyIDForPath, #"{"publicKey":"\#(publicKey)","environment":"staging"}"#, 400, "bad_request"),
            (device.keyIDForPath, "not json", 400, "bad_request"),
            // An unknown member (a misspelt environment) is refused, not dropped (stop 34, sweep).
            (device.keyIDForPath, #"{"publicKey":"\#(publicKey)","enviroment":"development"}"#, 400, "bad_request"),
        ]
        for (keyID, body, status, code) in cases {
            let response = try gateway.admin("PUT", "/admin/v1/tenants/\(appID)/keys/\(keyID)", json: body)
            #expect(response.status == status, "\(body)")
            if !code.isEmpty { #expect(response.code == code, "\(body)") }
        }
        let standardBase64Path = device.keyID.replacingOccurrences(of: "+", with: "%2B").replacingOccurrences(of: "/", with: "%2F")
        #expect(try gateway.admin("GET", "/admin/v1/tenants/\(appID)/keys/\(standardBase64Path)").status == 200)
        // base64url with its padding (RFC 4648 section 5 allows it): refused as key_id_invalid
        // whenever it had a - or _ (about 3 keyIds in 4) until stop 32 (independent sweep).
        let paddedURLSafe = device.keyID.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        #expect(try gateway.admin("GET", "/admin/v1/tenants/\(appID)/keys/\(paddedURLSafe)").status == 200, "\(paddedURLSafe)")

        let unknownTenant = try gateway.admin("GET", "/admin/v1/tenants/NOPE.x.y/keys/\(device.keyIDForPath)")
        #expect(unknownTenant.status == 404)
        #expect(unknownTenant.code == "not_found")
        let badSubject = try gateway.admin("PUT", "/admin/v1/tenants/\(appID)/subjects/household-1/subscription", json: "{}")
        #expect(badSubject.code == "bad_request")
        let notObject = try gateway.admin("PUT", "/admin/v1/tenants/\(appID)/subjects/\(UUID().uuidString)/subscription", json: "[1]")
        #expect(notObject.code == "bad_request")
        // Refused, each with its reason and nothing stored (stop 34, independent admin sweep):
        // an integer past 64 bits (it was stored as a double), JSON that does not parse (it was
        // "must be a JSON object"), and a subscription too large for the tokens that carry it
        // (a 20 KB one was stored and its tokens refused by the listener: 431).
        let subject = UUID().uuidString
        let path = "/admin/v1/tenants/\(appID)/subjects/\(subject)/subscription"
        let refusals: [(String, String)] = [
            (#"{"n":12345678901234567890123}"#, "beyond 2^53"),
            (#"{"a":[1,{"b":-99999999999999999999}]}"#, "beyond 2^53"),
            // Just past Int64.min reads as Int64.min; 2^53 + 1 as 2^53 (sweep of this stop's fix).
            (#"{"n":-9223372036854775809}"#, "beyond 2^53"),
            (#"{"n":9007199254740993.0}"#, "beyond 2^53"),
            (#"{"a":1,"a":2}"#, "duplicate member name"),
            (#"{"a":1e400}"#, "not JSON"),
            ("{\"plan\":\"\(String(repeating: "x", count: 4100))\"}", "at most 4096"),
        ]
        for (body, reason) in refusals {
            let refused = try gateway.admin("PUT", path, json: body)
            #expect(refused.status == 400 && refused.code == "bad_request", "\(body.prefix(60))")
            #expect(refused.text.contains(reason), "\(reason): \(refused.text)")
        }
        // A number that fits, a double and a subscription of exactly 4096 bytes are stored as written.
        let fits = "{\"n\":9223372036854775807,\"f\":1.5,\"plan\":\"\(String(repeating: "x", count: 4096 - 43))\"}"
        let stored = try gateway.admin("PUT", path, json: fits)
        #expect(stored.status == 200, "\(stored.text)")
        #expect(stored.text.contains("9223372036854775807"), "\(stored.text.prefix(100))")
    }

    /// The benchmark's load generator with more connections than threads: each thread waits on
    /// several connections at once, and every device's assertions still reach the gateway in
    /// counter order (an assertion out of order would be refused and counted as an error).
    @Test func loadRunsSeveralConnectionsOnOneThread() throws {
        let gateway = try TestGateway(tenants: ["a.yaml": TestGateway.tenantYAML(teamID: teamID)])
        defer { gateway.stop() }
        let configuration = DeviceSessionConfiguration(
            gateway: try HTTPEndpoint(url: "http://127.0.0.1:\(gateway.port)"),
            admin: try HTTPEndpoint(url: "http://127.0.0.1:\(gateway.adminPort)"), adminToken: gateway.adminToken)
        let report = try LoadGenerator(configuration: configuration, teamID: teamID, bundleID: "com.example.app",
                                       devices: 7, concurrency: 3, threads: 1, duration: .milliseconds(1500)).run()
        #expect(report.threads == 1 && report.concurrency == 3)
        #expect(report.errors.isEmpty, "\(report.errors)")
        #expect(report.refreshes > 7, "every device had its turn and more")
        #expect(report.connectionsOpened == 3, "one keep-alive connection each")
        #expect(report.challengeLatency.count == report.refreshes && report.cycleLatency.count == report.refreshes)
        #expect(report.description.contains("in flight 3, threads 1, connections 3"))
    }

    /// Runs `attestgate-device <command>` against `gateway`; returns exit status and stdout.
    func runCLI(_ gateway: TestGateway, _ command: String) throws -> (Int32, String) {
        let (status, output) = try runProgram(TestGateway.builtProductPath("attestgate-device"), [
            command, "--gateway", "http://127.0.0.1:\(gateway.port)", "--admin", "http://127.0.0.1:\(gateway.adminPort)",
            "--admin-token", gateway.adminToken, "--team", teamID, "--bundle", "com.example.app",
            "--state", gateway.directory + "/device.json",
        ])
        return (status, String(decoding: output, as: UTF8.self))
    }

    @Test func cliRegistersThenRefreshesWithAGrowingCounter() throws {
        let gateway = try TestGateway(tenants: ["a.yaml": TestGateway.tenantYAML(teamID: teamID)])
        defer { gateway.stop() }
        #expect(try runCLI(gateway, "register").0 == 0)
        for _ in 0..<2 {
            let (status, output) = try runCLI(gateway, "refresh")
            #expect(status == 0)
            #expect(output.trimmingCharacters(in: .whitespacesAndNewlines).split(separator: ".").count == 3)
        }
    }
}
