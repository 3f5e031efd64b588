import AGCrypto
import AGFormats
import AGTestSupport
import Foundation
import Testing

/// Bodies shaped to make the gateway work hard before it can refuse them (found by fuzzing).
@Suite("hostile request bodies, end to end", .timeLimit(.minutes(1)))
struct HostileBodyTests {
    let teamID = TestGateway.randomTeamID()

    /// Validate decodes the attestation object before any Redis work, for anyone: a CBOR map of
    /// 12,000 distinct keys (47 KB, inside the 64 KiB body limit) used to cost the event loop a
    /// quadratic duplicate-key scan (about a minute in a debug build).
    @Test func aHugeCBORMapInAValidateBodyIsRefusedAtOnce() throws {
        let gateway = try TestGateway(tenants: ["a.yaml": TestGateway.tenantYAML(teamID: teamID)], workers: 1)
        defer { gateway.stop() }
        let count = 12_000
        var object: [UInt8] = [0xB9, UInt8(count >> 8), UInt8(count & 0xFF)]
        for index in 0..<count { object += [0x19, UInt8(index >> 8), UInt8(index & 0xFF), 0x00] }
        let challenge = "hostile-challenge"
        let body = JSONValue.object([
            "keyId": .string(Base64.encode([UInt8](repeating: 7, count: 32))), "attestationObject": .string(Base64.encode(object)),
            "clientDataHash": .string(Base64.encode(SHA256.hash(challenge.utf8))), "challenge": .string(challenge),
        ]).serialized()
        #expect(body.count < 64 << 10)
        let response = try gateway.send("POST", "/api/v1/attestation/validate",
                                        headers: [("X-Team-ID", teamID), ("X-Bundle-ID", "com.example.app")], body: body)
        #expect(response.status == 400)
        #expect(response.code == "attestation_object_invalid")
        // The worker is free again at once.
        #expect(try gateway.send("GET", "/healthz").status == 200)
    }
}
