import AGEventLoop
import AGRedis
import AGTestSupport
import Foundation
import Synchronization
import Testing
@testable import AGConfig
@testable import AGPolicy
@testable import AGGateway

/// One simulated instance for tier tests: a loop, a command connection, a `TierStore`, and
/// optionally a `TierSync` keeping the store current.
final class TierTestInstance: Sendable {
    let loop: TestEventLoop
    let store = TierStore()
    let reloadCounter = ReloadCounter()
    private let parts: LoopBound<Parts>

    final class Parts {
        let redis: RedisClient
        var sync: TierSync?

        init(redis: RedisClient) {
            self.redis = redis
        }
    }

    /// Runs `body` with a fresh instance on its own loop; closes its connections and stops the
    /// loop afterwards, even if `body` throws or returns early.
    static func with<R>(_ url: RedisURL, sync: Bool, pollInterval: Duration? = nil,
                        _ body: (TierTestInstance) async throws -> R) async throws -> R {
        try await TestEventLoop.with { loop in
            let instance = await TierTestInstance(loop: loop, url: url, sync: sync, pollInterval: pollInterval)
            return try await withCleanup { try await body(instance) } cleanup: { await instance.close() }
        }
    }

    private init(loop: TestEventLoop, url: RedisURL, sync: Bool, pollInterval: Duration?) async {
        self.loop = loop
        let (store, reloads) = (self.store, self.reloadCounter)
        parts = await loop.make { [loop] base in
            let parts = Parts(redis: RedisClient(url: url, loop: base, timeout: .milliseconds(250)))
            if sync {
                let tierSync = TierSync(loop: loop.loop, redisURL: url, store: store,
                                        logger: Logger(level: .error, fileDescriptor: 2),
                                        timeout: .milliseconds(250), pollInterval: pollInterval)
                tierSync.onReload = { reloads.count.add(1, ordering: .relaxed) }
                parts.sync = tierSync
            }
            return parts
        }
    }

    func setTenantTier(_ appID: String, _ tier: String, fileTiers: [String: RateTier] = RateTier.builtIn) async -> Result<Void, TierChangeError> {
        let (parts, store) = (self.parts, self.store)
        return await loop.await { _, done in
            store.setTenantTier(appID: appID, tier: tier, fileTiers: fileTiers, redis: parts.value.redis) { done($0) }
        }
    }

    func clearTenantTier(_ appID: String) async -> Result<Bool, TierChangeError> {
        let (parts, store) = (self.parts, self.store)
        return await loop.await { _, done in store.clearTenantTier(appID: appID, redis: parts.value.redis) { done($0) } }
    }

    func setTier(_ name: String, _ numbers: TierNumbers, fileTiers: [String: RateTier] = RateTier.builtIn) async -> Result<RateTier, TierChangeError> {
        let (parts, store) = (self.parts, self.store)
        return await loop.await { _, done in
            store.setTier(name: name, numbers: numbers, fileTiers: fileTiers, redis: parts.value.redis) { done($0) }
        }
    }

    func load() async -> Result<[String], RedisError> {
        let (parts, store) = (self.parts, self.store)
        return await loop.await { _, done in store.load(from: parts.value.redis) { done($0) } }
    }

    /// Several raw commands sent back to back on this instance's connection.
    func send(_ commands: [[String]]) async -> [Result<RedisValue, RedisError>] {
        let parts = self.parts
        return await loop.await { _, done in
            var results: [Result<RedisValue, RedisError>] = []
            for command in commands {
                parts.value.redis.send(command) { result in
                    results.append(result)
                    if results.count == commands.count { done(results) }
                }
            }
        }
    }

    /// Waits (up to 2 s) until `TierSync` has read Redis at least once.
    func waitForFirstReload() async throws {
        try #require(await eventually { self.reloads > 0 })
    }

    /// Successful re-reads by this instance's `TierSync`.
    var reloads: Int { reloadCounter.count.load(ordering: .relaxed) }

    final class ReloadCounter: Sendable {
        let count = Atomic(0)
    }

    /// Closes the sync and the connection on the loop, before `with` stops the loop.
    private func close() async {
        let parts = self.parts
        await loop.submit { _ in
            parts.value.sync?.close()
            parts.value.redis.close()
        }
    }
}

@Suite("TierSync and admin tier changes")
struct RateLimitTierSyncTests {
    static let app = "ABCDE12345.com.example.app"

    @Test func adminChangesReachAnotherInstanceWithinASecond() async throws {
        try await RedisServer.withPrivate { redis in
            try await TierTestInstance.with(redis.url, sync: false) { admin in
                try await TierTestInstance.with(redis.url, sync: true, pollInterval: nil) { other in
                    try await other.waitForFirstReload()
                    let fileTiers = RateTier.builtIn
                    func otherTier() -> RateTier { other.store.effectiveTier(appID: Self.app, fileTier: "free", fileTiers: fileTiers) }

                    try await admin.setTenantTier(Self.app, "pro").get()
                    #expect(admin.store.effectiveTier(appID: Self.app, fileTier: "free", fileTiers: fileTiers).name == "pro")
                    #expect(await eventually { otherTier().name == "pro" })

                    let pro = try await admin.setTier("pro", TierNumbers(api: 12_345)).get()
                    #expect(pro == RateTier(name: "pro", attest: 500, challenge: 1_000, api: 12_345, madLimit: .limited(25_000)))
                    #expect(await eventually { otherTier() == pro })

                    #expect(try await admin.clearTenantTier(Self.app).get())
                    #expect(await eventually { otherTier() == RateTier.builtIn["free"] })
                    #expect(try await admin.clearTenantTier(Self.app).get() == false)

                    let stored = await admin.send([["HGETALL", TierStore.tierNumbersKey], ["HGETALL", TierStore.tenantTiersKey]])
                    #expect(try stored[0].get().hashFields == ["pro": #"{"api":12345}"#])
                    #expect(try stored[1].get().hashFields == [:])
                }
            }
        }
    }

    @Test func changesAreAppendedToTheEventsStreamWithTheirWrite() async throws {
        try await RedisServer.withPrivate { redis in
            try await TierTestInstance.with(redis.url, sync: false) { admin in
                try await admin.setTenantTier(Self.app, "business").get()
                _ = try await admin.setTier("business", TierNumbers(attest: 2_500)).get()
                _ = try await admin.clearTenantTier(Self.app).get()
                let entries = try await admin.send([["XRANGE", TierStore.eventsStream, "-", "+"]])[0].get()
                #expect(EventStreamReader.entries(in: [[.bulk(Array(TierStore.eventsStream.utf8)), entries]])
                    .map { String(decoding: $0.json, as: UTF8.self) } == [
                        TierStore.Event.tenantTier(appID: Self.app, tier: "business").json,
                        TierStore.Event.tierNumbers(name: "business", numbers: TierNumbers(attest: 2_500)).json,
                        TierStore.Event.tenantTier(appID: Self.app, tier: nil).json,
                    ])
            }
        }
    }

    @Test func hashesOfAPreClusterVersionAreMovedToTheirNewNames() async throws {
        try await RedisServer.withPrivate { redis in
            try await TierTestInstance.with(redis.url, sync: false) { writer in
                _ = await writer.send([["HSET", "ag:cfg:tenant-tier", Self.app, "pro"], ["HSET", "ag:cfg:tiers", "pro", #"{"api":777}"#]])
                try await TierTestInstance.with(redis.url, sync: true, pollInterval: nil) { reader in
                    try await reader.waitForFirstReload()
                    #expect(reader.store.tenantTierOverride(appID: Self.app) == "pro")
                    #expect(reader.store.effectiveTier(appID: Self.app, fileTier: "free", fileTiers: RateTier.builtIn).api == 777)
                    let old = await writer.send([["EXISTS", "ag:cfg:tenant-tier", "ag:cfg:tiers"]])
                    #expect(try old[0].get() == .integer(0))
                }
            }
        }
    }

    @Test func refusedChangesWriteNothing() async throws {
        try await RedisServer.withPrivate { redis in
            try await TierTestInstance.with(redis.url, sync: false) { admin in
                #expect(await admin.setTenantTier(Self.app, "platinum").failureValue == .unknownTier("platinum"))
                #expect(await admin.setTenantTier(Self.app, "Pro").failureValue == .invalidTierName("Pro"))
                #expect(await admin.setTier("no such", TierNumbers(api: 1)).failureValue == .invalidTierName("no such"))
                guard case .failure(.invalidNumbers(let reason)) = await admin.setTier("trial", TierNumbers(api: 100)) else {
                    Issue.record("an incomplete new tier was accepted")
                    return
                }
                #expect(reason.contains("attest, challenge, mad_limit"))
                let stored = await admin.send([["EXISTS", TierStore.tenantTiersKey, TierStore.tierNumbersKey]])
                #expect(try stored[0].get() == .integer(0))
                #expect(admin.store.overrides == TierStore.Overrides())

                redis.kill()
                try #require(await eventually { await admin.send([["PING"]])[0].isFailure })
                guard case .failure(.store) = await admin.setTenantTier(Self.app, "pro") else {
                    Issue.record("a change with Redis down did not fail with .store")
                    return
                }
                #expect(admin.store.tenantTierOverride(appID: Self.app) == nil)
            }
        }
    }

    @Test func aTierAnotherInstanceJustCreatedCanBeAssigned() async throws {
        try await RedisServer.withPrivate { redis in
            try await TierTestInstance.with(redis.url, sync: false) { creator in
                try await TierTestInstance.with(redis.url, sync: false) { assigner in
                    let trial = TierNumbers(attest: 5, challenge: 10, api: 100, madLimit: .limited(50))
                    _ = try await creator.setTier("trial", trial).get()
                    // The assigner has not heard of `trial`; the script finds it in Redis.
                    #expect(!assigner.store.tierExists("trial", fileTiers: RateTier.builtIn))
                    try await assigner.setTenantTier(Self.app, "trial").get()
                    _ = try await assigner.load().get()
                    #expect(assigner.store.effectiveTier(appID: Self.app, fileTier: "free", fileTiers: RateTier.builtIn)
                        == RateTier(name: "trial", attest: 5, challenge: 10, api: 100, madLimit: .limited(50)))
                }
            }
        }
    }

    @Test func pollingPicksUpUnannouncedWrites() async throws {
        try await RedisServer.withPrivate { redis in
            try await TierTestInstance.with(redis.url, sync: false) { writer in
                try await TierTestInstance.with(redis.url, sync: true, pollInterval: .milliseconds(500)) { reader in
                    try await reader.waitForFirstReload()
                    _ = try await writer.send([["HSET", TierStore.tenantTiersKey, Self.app, "enterprise"]])[0].get()
                    #expect(await eventually { reader.store.tenantTierOverride(appID: Self.app) == "enterprise" })
                }
            }
        }
    }

    @Test func aChangeMissedWhileTheReaderWasCutOffIsReadOnReconnect() async throws {
        try await RedisServer.withPrivate { redis in
            try await TierTestInstance.with(redis.url, sync: false) { writer in
                try await TierTestInstance.with(redis.url, sync: true, pollInterval: nil) { reader in
                    try await reader.waitForFirstReload()
                    // The first reload may come from the command connection: wait for the stream read.
                    var readerID: String?
                    for _ in 0..<250 where readerID == nil {
                        let clients = try await writer.send([["CLIENT", "LIST"]])[0].get().string ?? ""
                        readerID = clients.split(separator: "\n").first { $0.contains("cmd=xread") }
                            .flatMap { $0.split(separator: " ").first { $0.hasPrefix("id=") } }.map { String($0.dropFirst(3)) }
                        if readerID == nil { try await Task.sleep(for: .milliseconds(20)) }
                    }
                    let id = try #require(readerID)
                    let before = reader.reloads
                    // Drop the reader's connection and write, without an event, before it reconnects.
                    let results = await writer.send([
                        ["CLIENT", "KILL", "ID", id],
                        ["HSET", TierStore.tenantTiersKey, Self.app, "business"],
                    ])
                    #expect(try results[0].get() == .integer(1))
                    #expect(await eventually { reader.store.tenantTierOverride(appID: Self.app) == "business" })
                    #expect(reader.reloads > before)
                }
            }
        }
    }

    @Test func overridesSurviveARestart() async throws {
        try await RedisServer.withPrivate { redis in
            let expected = try await TierTestInstance.with(redis.url, sync: false) { first in
                try await first.setTenantTier(Self.app, "business").get()
                _ = try await first.setTier("business", TierNumbers(api: 55_555, madLimit: .unlimited)).get()
                return first.store.overrides
            }

            try await TierTestInstance.with(redis.url, sync: false) { restarted in
                #expect(try await restarted.load().get() == [])
                #expect(restarted.store.overrides == expected)
                #expect(restarted.store.effectiveTier(appID: Self.app, fileTier: "free", fileTiers: RateTier.builtIn)
                    == RateTier(name: "business", attest: 2_000, challenge: 4_000, api: 55_555, madLimit: .unlimited))

                try await TierTestInstance.with(redis.url, sync: true, pollInterval: nil) { synced in
                    try await synced.waitForFirstReload()
                    #expect(synced.store.overrides == expected)
                }
            }
        }
    }

    @Test func invalidStoredEntriesAreIgnoredOnLoad() async throws {
        try await RedisServer.withPrivate { redis in
            try await TierTestInstance.with(redis.url, sync: false) { instance in
                _ = await instance.send([
                    ["HSET", TierStore.tierNumbersKey, "gold", #"{"api":0}"#, "silver", #"{"api":700}"#, "Bad Name", #"{"api":1}"#],
                    ["HSET", TierStore.tenantTiersKey, Self.app, "silver", "OTHER12345.com.example.app", "NOT VALID"],
                ])
                let ignored = try await instance.load().get()
                #expect(ignored.count == 3)
                #expect(instance.store.overrides == TierStore.Overrides(tenantTiers: [Self.app: "silver"],
                                                                        tierNumbers: ["silver": TierNumbers(api: 700)]))
            }
        }
    }
}

extension Result {
    var isFailure: Bool {
        if case .failure = self { true } else { false }
    }

    var failureValue: Failure? {
        if case .failure(let error) = self { error } else { nil }
    }
}
