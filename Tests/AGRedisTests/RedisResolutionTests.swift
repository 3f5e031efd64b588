import AGEventLoop
import AGRedis
import AGTestSupport
import Testing

/// Redis behind host names: resolved with evdns before hiredis connects to an address,
/// several addresses tried in turn, a name resolved again after a connection loss, and a
/// resolver failure reported at once, never a stall.
@Suite struct RedisResolutionTests {
    @Test func connectsThroughANameTryingEachAddressInTurn() async throws {
        try await RedisServer.withPrivate { server in
            // 127.0.0.2 is loopback too, but nothing listens there: refused, next address.
            let dns = try await TestDNSServer.start(["redis.test": .init(a: ["127.0.0.2", "127.0.0.1"], ttl: 600)])
            let url = RedisURL(endpoint: .tcp(host: "redis.test", port: server.port))
            try await withResolvingClient(url, dns) { redis in
                try await redis.waitUntil(.connected)
                #expect(try await redis.value(["PING"]) == .status("PONG"))
                #expect(dns.queries("redis.test") == 1)

                // A lost connection resolves the name again: the host may have moved.
                server.kill()
                try await redis.waitUntil(.disconnected)
                try await server.restart()
                try await redis.waitUntil(.connected)
                #expect(dns.queries("redis.test") >= 2)
            }
        }
    }

    @Test func unknownNameFailsAtOnceAndSilentResolverWithinTheDeadline() async throws {
        let dns = try await TestDNSServer.start(["black.test": .init(a: ["127.0.0.1"], mode: "drop")])
        try await withResolvingClient(RedisURL(endpoint: .tcp(host: "missing.test", port: 6379)), dns) { redis in
            try await redis.waitUntil(.disconnected)
            let lastError = await redis.loop.submit { _ in redis.client.value.lastError } ?? ""
            #expect(lastError.contains("cannot resolve 'missing.test'"))
            let (result, elapsed) = await redis.timedSend(["GET", "k"])
            #expect(result.isUnavailable)
            #expect(elapsed < .milliseconds(50))
        }
        // A name server that never answers: the command fails at its deadline.
        try await withResolvingClient(RedisURL(endpoint: .tcp(host: "black.test", port: 6379)), dns) { redis in
            let (result, elapsed) = await redis.timedSend(["GET", "k"])
            #expect(result.isUnavailable)
            #expect(elapsed < .milliseconds(900))
        }
    }

    private func withResolvingClient(_ url: RedisURL, _ dns: TestDNSServer,
                                     _ body: (ClientHarness) async throws -> Void) async throws {
        try await TestEventLoop.with { loop in
            let states = StateLog()
            let configuration = DNSResolver.Configuration(nameservers: [dns.nameserver], hostsFile: nil,
                                                          queryTimeout: .milliseconds(300), attempts: 1)
            let client = await loop.make { base in
                let resolver = try! DNSResolver(loop: base, configuration: configuration)
                let client = RedisClient(url: url, loop: base, timeout: .milliseconds(500),
                                         reconnectPolicy: .init(initialDelay: .milliseconds(20), maximumDelay: .milliseconds(200)),
                                         resolver: resolver)
                client.onStateChange = { states.append($0) }
                return client
            }
            let harness = ClientHarness(loop: loop, client: client, states: states)
            try await withCleanup { try await body(harness) } cleanup: { await harness.close() }
        }
    }
}
