@testable import AGEventLoop
import AGTestSupport
import Foundation
import Testing

/// The evdns resolver against a real DNS server on loopback (Tests/Fixtures/dns_server.py).
@Suite struct DNSResolverTests {
    @Test func literalsNeedNoQuery() async throws {
        try await withResolver([:]) { resolver, _ async throws in
            #expect(try await resolver.addresses("127.0.0.1") == [IPAddress("127.0.0.1")!])
            #expect(try await resolver.addresses("[::1]") == [IPAddress("::1")!])
            #expect(IPAddress("::1")!.description(port: 6379) == "[::1]:6379")
            #expect(IPAddress("10.1.2.3")!.description == "10.1.2.3")
            #expect(IPAddress("redis.internal") == nil)
        }
    }

    @Test func mergesBothFamiliesIPv4First() async throws {
        let zone = ["redis.test": TestDNSServer.Entry(a: ["10.0.0.1", "10.0.0.2"], aaaa: ["fd00::1"])]
        try await withResolver(zone) { resolver, server in
            let addresses = try await resolver.addresses("Redis.TEST")
            #expect(addresses.map(\.description) == ["10.0.0.1", "10.0.0.2", "fd00::1"])
            #expect(server.queries("redis.test", type: "A") == 1)
            #expect(server.queries("redis.test", type: "AAAA") == 1)
            // Only one family answering is still an answer.
            try server.setZone(["v6only.test": .init(aaaa: ["fd00::9"])])
            #expect(try await resolver.addresses("v6only.test") == [IPAddress("fd00::9")!])
        }
    }

    @Test func hostsFileIsConsultedBeforeDNS() async throws {
        let hostsPath = NSTemporaryDirectory() + "aghosts-" + UUID().uuidString
        try "# comment\n10.9.9.9  Cache.Internal  cache # trailing\nnot-an-ip broken\n::1 v6.internal\n"
            .write(toFile: hostsPath, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: hostsPath) }
        let zone = ["cache.internal": TestDNSServer.Entry(a: ["10.0.0.1"])]
        try await withResolver(zone, hostsFile: hostsPath) { resolver, server async throws in
            #expect(try await resolver.addresses("cache.internal") == [IPAddress("10.9.9.9")!])
            #expect(try await resolver.addresses("cache") == [IPAddress("10.9.9.9")!])
            #expect(try await resolver.addresses("v6.internal.") == [IPAddress("::1")!])
            #expect(server.queries("cache.internal") == 0)
        }
        let hosts = HostsFile(contents: "127.0.0.1 localhost\n127.0.1.1 box box.lan\n")
        #expect(hosts.addresses(for: "BOX.lan") == [IPAddress("127.0.1.1")!])
        #expect(hosts.addresses(for: "other") == nil)
    }

    @Test func answersAreCachedForTheirTTLThenAskedAgain() async throws {
        let zone = ["long.test": TestDNSServer.Entry(a: ["10.0.0.1"], ttl: 600), "svc.test": .init(a: ["10.0.0.1"], ttl: 1)]
        try await withResolver(zone) { resolver, server in
            #expect(try await resolver.addresses("long.test") == [IPAddress("10.0.0.1")!])
            #expect(try await resolver.addresses("svc.test") == [IPAddress("10.0.0.1")!])
            try server.setZone(["long.test": .init(a: ["10.0.0.2"], ttl: 600), "svc.test": .init(a: ["10.0.0.2"], ttl: 1)])
            // Within the TTL: the cache answers, no new query.
            #expect(try await resolver.addresses("long.test") == [IPAddress("10.0.0.1")!])
            #expect(server.queries("long.test") == 1)
            // Once the 1 s TTL expired, the new record is fetched.
            var latest: [IPAddress] = []
            _ = try await poll(within: .seconds(10), every: .milliseconds(50)) {
                latest = try await resolver.addresses("svc.test")
                return latest == [IPAddress("10.0.0.2")!]
            }
            #expect(latest == [IPAddress("10.0.0.2")!])
            #expect(server.queries("svc.test") == 2)

            // TTL 0: never cached.
            try server.setZone(["zero.test": .init(a: ["10.0.0.3"], ttl: 0)])
            _ = try await resolver.addresses("zero.test")
            _ = try await resolver.addresses("zero.test")
            #expect(server.queries("zero.test") == 2)
        }
    }

    @Test func forgetMakesTheNextLookupAskAgain() async throws {
        try await withResolver(["db.test": .init(a: ["10.0.0.1"], ttl: 600)]) { resolver, server in
            _ = try await resolver.addresses("db.test")
            try server.setZone(["db.test": .init(a: ["10.0.0.7"], ttl: 600)])
            await resolver.loop.submit { _ in resolver.value.forget("db.test") }
            #expect(try await resolver.addresses("db.test") == [IPAddress("10.0.0.7")!])
            #expect(server.queries("db.test") == 2)
        }
    }

    @Test func concurrentLookupsShareOneQuery() async throws {
        try await withResolver(["shared.test": .init(a: ["10.0.0.5"])]) { resolver, server in
            let results: [Result<[IPAddress], DNSError>] = await resolver.loop.await { _, done in
                var results: [Result<[IPAddress], DNSError>] = []
                for _ in 0..<3 {
                    resolver.value.resolve("shared.test") { result in
                        results.append(result)
                        if results.count == 3 { done(results) }
                    }
                }
            }
            #expect(results.allSatisfy { (try? $0.get()) == [IPAddress("10.0.0.5")!] })
            #expect(server.queries("shared.test") == 1)
        }
    }

    @Test func failuresAreQuickAndNeverCached() async throws {
        let zone = ["black.test": TestDNSServer.Entry(a: ["10.0.0.1"], mode: "drop"),
                    "broken.test": TestDNSServer.Entry(a: ["10.0.0.1"], mode: "servfail")]
        try await withResolver(zone) { resolver, server in
            // NXDOMAIN is the server's answer, not a timeout: no wait beyond one round trip.
            let missing = await resolver.resolve("missing.test")
            guard case .failure(let notFound) = missing else { Issue.record("resolved a missing name"); return }
            #expect(notFound.isNotFound)
            #expect(notFound.description.contains("missing.test"))

            let broken = await resolver.resolve("broken.test")
            guard case .failure(let serverFailure) = broken else { Issue.record("resolved on SERVFAIL"); return }
            #expect(!serverFailure.isNotFound)

            // A server that never answers: one try of `queryTimeout`, then a timeout error, not a
            // stall (measured on the loop thread).
            let (silent, waited) = await resolver.timedResolve("black.test")
            guard case .failure(let timeout) = silent else { Issue.record("resolved a dropped query"); return }
            #expect(timeout.reason.contains("timeout") || timeout.reason.contains("timed out"))
            #expect(waited < .seconds(4))

            // Failures are not cached: the fixed record is picked up at once.
            try server.setZone(["missing.test": .init(a: ["10.0.0.4"])])
            #expect(try await resolver.addresses("missing.test") == [IPAddress("10.0.0.4")!])
            #expect(await resolver.resolve("not a name!").isFailure)
        }
    }

    /// A name server that is no address is refused when the resolver is made, and the refused
    /// resolver frees its evdns base once (its `deinit` runs on the thrown-away object too).
    @Test func aNameServerThatIsNoAddressIsRefused() async throws {
        await TestEventLoop.with { loop in
            let refusal = await loop.submit { base -> String? in
                do {
                    _ = try DNSResolver(loop: base, configuration: .init(nameservers: ["127.0.0.1", "dns.internal"], hostsFile: nil))
                    return nil
                } catch {
                    return "\(error)"
                }
            }
            #expect(refusal == "cannot resolve 'dns.internal': not a name server address")
        }
    }

    /// A resolver still held once its loop stopped (a Redis client released later, off the
    /// loop): the loop shuts it down when `run()` returns, so the lookup that never got an
    /// answer is let go, and releasing the resolver afterwards frees nothing twice. Before, the
    /// lookup stayed alive (its query contexts were released only by callbacks the stopped loop
    /// never ran) and the evdns base was left behind: LeakSanitizer's report at exit.
    @Test func aResolverOutlivingItsLoopLeavesNoLookupBehind() async throws {
        let server = try await TestDNSServer.start(["black.test": TestDNSServer.Entry(a: ["10.0.0.1"], mode: "drop")])
        let testLoop = TestEventLoop()
        let configuration = DNSResolver.Configuration(nameservers: [server.nameserver], hostsFile: nil,
                                                      queryTimeout: .seconds(30), attempts: 1)
        var resolver: LoopBound<DNSResolver>? = await testLoop.make { base in
            let resolver = try! DNSResolver(loop: base, configuration: configuration)
            resolver.resolve("black.test") { _ in Issue.record("a dropped query completed") }
            return resolver
        }
        final class WeakLookup: @unchecked Sendable { weak var value: DNSLookup? }
        let lookup = WeakLookup()
        await testLoop.submit { [resolver] _ in lookup.value = resolver!.value.inFlight["black.test"] }
        #expect(lookup.value != nil, "the lookup is in flight")
        await testLoop.shutdown()
        #expect(lookup.value == nil, "the stopped loop let the unanswered lookup go")
        // Released now, off the stopped loop: its deinit must free nothing a second time (a
        // double evdns_base_free, which ASan would report).
        resolver = nil
        withExtendedLifetime(resolver) {}
    }

    /// A resolver released on its loop's thread just as the loop stops, a lookup in flight (a
    /// Redis client torn down with its loop): its evdns base is freed at once, and nothing of
    /// the lookup may wait for a callback the stopped loop will never run. Freeing the base
    /// with evdns's "fail the requests" deferred a callback per query to the next loop
    /// iteration, which never came: the callbacks' 600-byte records, the request handles and
    /// the lookup with its two query contexts stayed behind (LeakSanitizer's report at exit).
    @Test func aResolverReleasedAsItsLoopStopsLeavesNoLookupBehind() async throws {
        let server = try await TestDNSServer.start(["black.test": TestDNSServer.Entry(a: ["10.0.0.1"], mode: "drop")])
        let testLoop = TestEventLoop()
        let configuration = DNSResolver.Configuration(nameservers: [server.nameserver], hostsFile: nil,
                                                      queryTimeout: .seconds(30), attempts: 1)
        final class Holder: @unchecked Sendable {
            var resolver: DNSResolver?
            weak var lookup: DNSLookup?
        }
        let holder = Holder()
        await testLoop.submit { base in
            let resolver = try! DNSResolver(loop: base, configuration: configuration)
            resolver.resolve("black.test") { _ in Issue.record("a dropped query completed") }
            holder.lookup = resolver.inFlight["black.test"]
            holder.resolver = resolver
        }
        #expect(holder.lookup != nil, "the lookup is in flight")
        await testLoop.submit { base in
            // The stop first: the loop returns after the current callbacks, before the next
            // iteration; then the last reference goes, on the loop's thread.
            base.stop()
            holder.resolver = nil
        }
        await testLoop.shutdown()
        #expect(holder.lookup == nil, "the released resolver let its unanswered lookup go")
    }

    private func withResolver(_ zone: [String: TestDNSServer.Entry], hostsFile: String? = nil,
                              _ body: (ResolverHarness, TestDNSServer) async throws -> Void) async throws {
        let server = try await TestDNSServer.start(zone)
        try await TestEventLoop.with { loop in
            // A generous query timeout: the Python server may be slow on a loaded machine, and
            // an answer must never turn into a timeout here.
            let configuration = DNSResolver.Configuration(nameservers: [server.nameserver], hostsFile: hostsFile,
                                                          queryTimeout: .seconds(2), attempts: 1)
            let resolver = await loop.make { base in try! DNSResolver(loop: base, configuration: configuration) }
            try await body(ResolverHarness(resolver: resolver), server)
            await loop.submit { _ in _ = resolver }
        }
    }
}

/// A resolver on a test loop, awaited from the test.
struct ResolverHarness: Sendable {
    let resolver: LoopBound<DNSResolver>
    var loop: EventLoop { resolver.loop }
    var value: DNSResolver { resolver.value }

    /// The addresses, or the resolver's error thrown.
    func addresses(_ host: String) async throws -> [IPAddress] {
        switch await resolve(host) {
        case .success(let addresses): return addresses
        case .failure(let error): throw error
        }
    }

    /// The result and how long it took, measured on the loop thread.
    func timedResolve(_ host: String) async -> (Result<[IPAddress], DNSError>, Duration) {
        await loop.await { _, done in
            let start = ContinuousClock.now
            resolver.value.resolve(host) { done(($0, ContinuousClock.now - start)) }
        }
    }

    func resolve(_ host: String) async -> Result<[IPAddress], DNSError> {
        await loop.await { _, done in resolver.value.resolve(host) { done($0) } }
    }
}

extension EventLoop {
    fileprivate func await<T: Sendable>(_ work: @escaping @Sendable (EventLoop, @escaping @Sendable (T) -> Void) -> Void) async -> T {
        await withCheckedContinuation { continuation in
            execute { [self] in work(self) { continuation.resume(returning: $0) } }
        }
    }
}

extension Result {
    fileprivate var isFailure: Bool {
        if case .failure = self { true } else { false }
    }
}
