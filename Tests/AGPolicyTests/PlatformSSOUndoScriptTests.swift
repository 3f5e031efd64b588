import AGRedis
import AGTestSupport
import Foundation
import Testing
@testable import AGPolicy

/// `PlatformSSOScripts.undoRotation` against a real `redis-server`, on the state two parallel
/// refreshes with one token `T` leave when neither commit is confirmed (`redis.wait_replicas`):
/// the first rotated `T` to `S1`, the second (a grace answer) made `S2` current with `S1` in
/// `alts`. Whichever undo runs first, `T` must end current: the Mac never got `S1` or `S2`
/// (a sweep of stop 35's fixes saw `S1` made current again, and the Mac's `T` then read as
/// reuse once the grace window closed).
@Suite("Platform SSO undo script")
struct PlatformSSOUndoScriptTests {
    let url = TestGateway.sharedRedisURL
    let tag = "ag:{T\(UUID().uuidString.prefix(8)).com.example.app}:psso:"
    var family: String { tag + "fam:f" }

    func undo(presented: String, successor: String) throws -> String {
        try RedisCLI.run(url, "EVAL", PlatformSSOScripts.undoRotation.source, "2", family, tag + "rt:" + successor,
                         "1700000000000000", presented, successor)
    }

    @Test(arguments: [["S1", "S2"], ["S2", "S1"]])
    func bothUndoneInEitherOrderLeaveThePresentedTokenCurrent(order: [String]) throws {
        _ = try RedisCLI.run(url, "HSET", family, "cur", "S2", "prev", "T", "alts", "S1", "rev", "0")
        for successor in ["S1", "S2"] { _ = try RedisCLI.run(url, "SET", tag + "rt:" + successor, "f") }
        defer { _ = try? RedisCLI.run(url, "DEL", family, tag + "rt:S1", tag + "rt:S2") }
        for successor in order { #expect(try undo(presented: "T", successor: successor) == "1", "\(successor)") }
        #expect(try RedisCLI.run(url, "HGET", family, "cur") == "T")
        #expect(try RedisCLI.run(url, "HGET", family, "prev") == "")
        #expect(try RedisCLI.run(url, "HGET", family, "alts") == "")
        #expect(try RedisCLI.run(url, "EXISTS", tag + "rt:S1", tag + "rt:S2") == "0", "both successors forgotten")
    }

    /// Only the unconfirmed one is taken back: the other answer reached the Mac.
    @Test(arguments: [("S1", "S2"), ("S2", "S1")])
    func oneUndoneLeavesTheOtherCurrent(undone: String, kept: String) throws {
        _ = try RedisCLI.run(url, "HSET", family, "cur", "S2", "prev", "T", "alts", "S1", "rev", "0")
        defer { _ = try? RedisCLI.run(url, "DEL", family) }
        #expect(try undo(presented: "T", successor: undone) == "1")
        #expect(try RedisCLI.run(url, "HGET", family, "cur") == kept)
        #expect(try RedisCLI.run(url, "HGET", family, "prev") == "T")
        #expect(try RedisCLI.run(url, "HGET", family, "alts") == "")
    }

    /// A successor used since (the family moved on) is not taken back.
    @Test func aSuccessorUsedSinceStays() throws {
        _ = try RedisCLI.run(url, "HSET", family, "cur", "S3", "prev", "S1", "alts", "", "rev", "0")
        defer { _ = try? RedisCLI.run(url, "DEL", family) }
        #expect(try undo(presented: "T", successor: "S1") == "0")
        #expect(try RedisCLI.run(url, "HGET", family, "cur") == "S3")
        #expect(try RedisCLI.run(url, "HGET", family, "prev") == "S1")
    }
}
