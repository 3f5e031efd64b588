import AGDevice
import AGHTTP
import AGFormats
import AGTestSupport
import Foundation
import Testing

/// A small seeded generator (SplitMix64), so a failing mutation can be replayed.
struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

@Suite("Platform SSO: mutated requests and the device client, end to end")
struct PlatformSSOMutationAndClientTests {
    static let base64URL = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// One mutation of `body`: a flipped bit, an inserted or deleted byte, a cut, a repeated
    /// piece, or one JWS character swapped for another base64url character.
    static func mutate(_ body: [UInt8], _ random: inout SeededGenerator) -> [UInt8] {
        var bytes = body
        let index = Int.random(in: 0..<bytes.count, using: &random)
        switch Int.random(in: 0..<6, using: &random) {
        case 0: bytes[index] ^= UInt8(1 << Int.random(in: 0..<8, using: &random))
        case 1: bytes.insert(UInt8.random(in: 0...255, using: &random), at: index)
        case 2: bytes.remove(at: index)
        case 3: bytes = Array(bytes.prefix(index))
        case 4: bytes.insert(contentsOf: bytes[index..<min(bytes.count, index + 40)], at: index)
        default: bytes[index] = base64URL.randomElement(using: &random)!
        }
        return bytes
    }

    @Test func mutatedFormsAndTokensAreRefusedWithoutCrashOr500() throws {
        let sso = try PlatformSSOGateway()
        defer { sso.stop() }
        var (mac, token) = try sso.enrolledMac()
        var random = SeededGenerator(state: 0x5EED_0010)
        let known: Set<String> = ["invalid_request", "invalid_grant", "unsupported_grant_type"]
        var statuses: [Int: Int] = [:]
        for round in 0..<300 {
            let request = sso.request(mac, token: token, nonce: try sso.nonce())
            let valid = PlatformSSOGateway.form(try request.signed(by: mac))
            let mutated = Self.mutate(valid, &random)
            let response = try sso.post(mutated)
            statuses[response.status, default: 0] += 1
            #expect([200, 400, 401].contains(response.status), "round \(round): \(response.status) \(response.text)")
            if response.status == 200 {
                token = try sso.login(response, mac, request).refreshToken
            } else {
                #expect(known.contains(response.oauthError ?? ""), "round \(round): \(response.text)")
            }
        }
        #expect(statuses[400, default: 0] > 200, "most mutations break the form or the JWS: \(statuses)")
        #expect(try sso.gateway.send("GET", "/healthz").status == 200)
        mac = try #require(Optional(mac))
        _ = try sso.rotate(mac, token: token)
    }

    /// `attestgate-device psso …` against the gateway.
    func runCLI(_ sso: PlatformSSOGateway, _ command: String, state: String) throws -> (Int32, String) {
        let (status, output) = try runProgram(TestGateway.builtProductPath("attestgate-device"), [
            "psso", command, "--gateway", "http://127.0.0.1:\(sso.gateway.port)",
            "--admin", "http://127.0.0.1:\(sso.gateway.adminPort)", "--admin-token", sso.gateway.adminToken,
            "--team", sso.teamID, "--state", state, "--client-id", PlatformSSOGateway.clientID,
            "--audience", PlatformSSOGateway.audience, "--issuer", "https://attestgate.test", "--user", "ada@example.com",
        ], mergingErrors: true)
        return (status, String(decoding: output, as: UTF8.self))
    }

    /// The benchmark's Platform SSO load with more connections than threads: every answer is
    /// decrypted and checked as a Mac does, and each Mac's refresh token only moves forward (a
    /// token presented twice would revoke its family and fail every later refresh).
    @Test func loadRunsSeveralMacsConnectionsOnOneThread() throws {
        let sso = try PlatformSSOGateway()
        defer { sso.stop() }
        let session = DeviceSessionConfiguration(
            gateway: try HTTPEndpoint(url: "http://127.0.0.1:\(sso.gateway.port)"),
            admin: try HTTPEndpoint(url: "http://127.0.0.1:\(sso.gateway.adminPort)"), adminToken: sso.gateway.adminToken)
        let configuration = MacConfiguration(session: session, prefix: "/psso", clientID: PlatformSSOGateway.clientID,
                                             audience: PlatformSSOGateway.audience, issuer: "https://attestgate.test")
        let report = try PlatformSSOLoadGenerator(configuration: configuration, teamID: sso.teamID, bundleID: "com.example.app",
                                                  devices: 5, concurrency: 2, threads: 1, duration: .milliseconds(1500)).run()
        #expect(report.threads == 1 && report.concurrency == 2)
        #expect(report.errors.isEmpty, "\(report.errors)")
        #expect(report.refreshes > 5, "every Mac had its turn and more")
        #expect(report.connectionsOpened == 2)
        #expect(report.description.contains("nonce "))
    }

    @Test func theDeviceClientPlaysAMac() throws {
        let sso = try PlatformSSOGateway()
        defer { sso.stop() }
        let state = sso.gateway.directory + "/mac.json"
        let (demoStatus, demo) = try runCLI(sso, "demo", state: state)
        #expect(demoStatus == 0, "\(demo)")
        #expect(demo.contains("\"kid\" : \""), "the request is printed Apple-style")
        #expect(demo.contains("\"sub\": \"ada@example.com\""))
        #expect(demo.contains("replay    the login's refresh token once more → 401 invalid_grant"))
        let saved = try #require(try SimulatedMac.load(from: state))
        #expect(!demo.contains(try #require(saved.refreshToken)), "no refresh token on screen")

        // The demo's replay revoked its family: a refresh now asks for a login, a login fixes it.
        let (revoked, revokedOutput) = try runCLI(sso, "refresh", state: state)
        #expect(revoked == 1 && revokedOutput.contains("401 invalid_grant"), "\(revokedOutput)")
        #expect(try runCLI(sso, "register", state: state).0 == 0)
        let (status, output) = try runCLI(sso, "refresh", state: state)
        #expect(status == 0, "\(output)")
        #expect(output.contains("\"iss\": \"https://attestgate.test\""))
        #expect(output.contains("\"aud\": \"\(PlatformSSOGateway.clientID)\""))
        let record = try sso.gateway.admin("GET", "\(sso.devicesPath)/\(saved.keyID.urlSafe)")
        #expect((record.json["user"] as? [String: Any])?["sub"] as? String == "ada@example.com")
        #expect(try PrivateFileMode.of(state) == 0o600)
    }
}

/// The permission bits of a file.
enum PrivateFileMode {
    static func of(_ path: String) throws -> Int {
        (try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int) ?? -1
    }
}
