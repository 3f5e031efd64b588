import AGRedis
import AGTestSupport
import Foundation
import Testing
@testable import AGPolicy

/// `DeviceScripts.invalidate` against a real `redis-server`: it deletes a device record only
/// while the record holds the key that signed the refused assertion and is not revoked, and
/// then (only then) moves the tenant's device epoch.
@Suite("device invalidate script")
struct DeviceInvalidateScriptTests {
    let url = TestGateway.sharedRedisURL
    let tag = "ag:{T\(UUID().uuidString.prefix(8)).com.example.app}:"
    var key: String { tag + "dev:k" }
    var epochKey: String { tag + "devepoch" }

    func invalidate(pk: String, counter: Int = 3) throws -> String {
        try RedisCLI.run(url, "EVAL", DeviceScripts.invalidate.source, "2", key, epochKey, "1700000000000000", pk, "1000", String(counter))
    }

    @Test(arguments: [
        // (stored pk, stored rev, pk that verified, deleted?)
        ("pkA", "0", "pkA", true),
        ("pkA", "1", "pkA", false),  // revoked meanwhile: the operator's decision stays
        ("pkB", "0", "pkA", false),  // re-attested meanwhile with another key
    ])
    func deletesOnlyTheRecordOfTheKeyThatSigned(stored: String, revoked: String, verified: String, deleted: Bool) throws {
        _ = try RedisCLI.run(url, "HSET", key, "pk", stored, "ctr", "3", "rev", revoked)
        _ = try RedisCLI.run(url, "SET", epochKey, "7")
        defer { _ = try? RedisCLI.run(url, "DEL", key, epochKey) }
        #expect(try invalidate(pk: verified) == (deleted ? "1" : "0"))
        #expect(try RedisCLI.run(url, "EXISTS", key) == (deleted ? "0" : "1"))
        #expect(try RedisCLI.run(url, "GET", epochKey) == (deleted ? "8" : "7"), "a deletion moves the epoch, nothing else does")
        if !deleted { #expect(try RedisCLI.run(url, "HGET", key, "pk") == stored) }
    }

    /// An operator's import of the same key with a new counter, between the refresh's judgement
    /// (against counter 10) and this script, is kept: its PUT was answered 200 (a race sweep,
    /// stop 35, saw such records deleted in 66 of 150 trials).
    @Test func aRecordImportedAgainWithAnotherCounterIsKept() throws {
        _ = try RedisCLI.run(url, "HSET", key, "pk", "pkA", "ctr", "0", "rev", "0")
        _ = try RedisCLI.run(url, "SET", epochKey, "7")
        defer { _ = try? RedisCLI.run(url, "DEL", key, epochKey) }
        #expect(try invalidate(pk: "pkA", counter: 10) == "0")
        #expect(try RedisCLI.run(url, "HGET", key, "ctr") == "0")
        #expect(try RedisCLI.run(url, "GET", epochKey) == "7")
        #expect(try invalidate(pk: "pkA", counter: 0) == "1", "the counter it was judged against: deleted")
    }

    @Test func aMissingRecordStaysMissing() throws {
        #expect(try invalidate(pk: "pkA") == "0")
        #expect(try RedisCLI.run(url, "EXISTS", key) == "0")
        #expect(try RedisCLI.run(url, "EXISTS", epochKey) == "0")
    }

    @Test func aMissingEpochStartsAtTheSeedNotAtOne() throws {
        _ = try RedisCLI.run(url, "HSET", key, "pk", "pkA", "rev", "0")
        defer { _ = try? RedisCLI.run(url, "DEL", key, epochKey) }
        #expect(try invalidate(pk: "pkA", counter: 0) == "1", "no ctr field reads as 0")
        #expect(try RedisCLI.run(url, "GET", epochKey) == "1000")
    }
}
