import AGRedis
import AGTestSupport
import Foundation
import Testing
@testable import AGPolicy

/// `DeviceScripts.invalidate` against a real `redis-server`: it deletes a device record only
/// while the record holds the key that signed the refused assertion and is not revoked.
@Suite("device invalidate script")
struct DeviceInvalidateScriptTests {
    let url = TestGateway.sharedRedisURL
    let key = "ag:{T\(UUID().uuidString.prefix(8)).com.example.app}:dev:k"

    func invalidate(pk: String) throws -> String {
        try RedisCLI.run(url, "EVAL", DeviceScripts.invalidate.source, "1", key, "1700000000000000", pk)
    }

    @Test(arguments: [
        // (stored pk, stored rev, pk that verified, deleted?)
        ("pkA", "0", "pkA", true),
        ("pkA", "1", "pkA", false),  // revoked meanwhile: the operator's decision stays
        ("pkB", "0", "pkA", false),  // re-attested meanwhile with another key
    ])
    func deletesOnlyTheRecordOfTheKeyThatSigned(stored: String, revoked: String, verified: String, deleted: Bool) throws {
        _ = try RedisCLI.run(url, "HSET", key, "pk", stored, "ctr", "3", "rev", revoked)
        defer { _ = try? RedisCLI.run(url, "DEL", key) }
        #expect(try invalidate(pk: verified) == (deleted ? "1" : "0"))
        #expect(try RedisCLI.run(url, "EXISTS", key) == (deleted ? "0" : "1"))
        if !deleted { #expect(try RedisCLI.run(url, "HGET", key, "pk") == stored) }
    }

    @Test func aMissingRecordStaysMissing() throws {
        #expect(try invalidate(pk: "pkA") == "0")
        #expect(try RedisCLI.run(url, "EXISTS", key) == "0")
    }
}
