import Testing

@testable import AGConfig
@testable import AGPolicy

/// Route matching and the path form it runs on.
@Suite struct ProxyRoutingTests {
    static let table = ProxyRouteTable([
        RouteConfig(prefix: "/", auth: .required),
        RouteConfig(prefix: "/public", auth: .anonymous),
        RouteConfig(prefix: "/public/private/", auth: .required),
        RouteConfig(prefix: "/v1/", auth: .anonymous),
    ])

    @Test(arguments: [
        ("/", "/"), ("/anything", "/"), ("/public", "/public"), ("/public/x", "/public"), ("/publicity", "/"),
        ("/public/private", "/public/private/"), ("/public/private/x", "/public/private/"), ("/public/privatex", "/public"),
        ("/v1", "/v1/"), ("/v1/users", "/v1/"), ("/v10", "/"),
    ])
    func longestPrefixWins(path: String, prefix: String) {
        #expect(Self.table.match(path)?.prefix == prefix)
    }

    /// The byte matcher against the rule spelled out on `String`s, on random paths and prefixes
    /// built from the pieces where the rule has its edges (`/`, a shared stem, the empty path).
    @Test func prefixMatchingFollowsTheSegmentRule() {
        let pieces = ["/", "/", "a", "ab", "b", "/a", "x/", "é"]
        func random() -> String { (0..<Int.random(in: 0...4)).map { _ in pieces.randomElement()! }.joined() }
        func rule(_ path: String, _ prefix: String) -> Bool {
            if prefix.hasSuffix("/") { return path.hasPrefix(prefix) || path + "/" == prefix }
            return path == prefix || path.hasPrefix(prefix + "/")
        }
        var matched = 0
        for _ in 0..<20_000 {
            let path = random(), prefix = random()
            let result = ProxyRouteTable.matches(path, prefix: prefix)
            #expect(result == rule(path, prefix), "\(path) against \(prefix)")
            if result { matched += 1 }
        }
        #expect(matched > 1_000, "both outcomes are exercised")
    }

    @Test func noCatchAllMeansNoMatch() {
        let table = ProxyRouteTable([RouteConfig(prefix: "/api", auth: .required)])
        #expect(table.match("/other") == nil)
        #expect(table.match("/apix") == nil)
        #expect(table.match("/api")?.prefix == "/api")
    }

    @Test(arguments: [
        ("/a/b", "/a/b"), ("/a//b", "/a/b"), ("//public", "/public"), ("/%70ublic/x", "/public/x"), ("/a%3ab", "/a%3Ab"),
        ("/a%20b", "/a%20b"), ("/a.b/c..d", "/a.b/c..d"), ("/", "/"),
    ])
    func normalization(raw: String, normalized: String) {
        #expect(ProxyPath.normalizedForMatching(raw[...]) == normalized)
    }

    @Test(arguments: ["/a/../b", "/a/./b", "/..", "/a/%2e%2e/b", "/a/.%2E/b", "/a%2Fb", "/a%5cb", "/a\\b", "/a%00", "/a%",
                      "/a%zz", "*", "http://example.com/a", "",
                      // Dot segments once path parameters are cut and decoding is applied twice (issue 9).
                      "/public/..;/api/x", "/public/%2e%2e;/api/x", "/public/.;/api/x", "/public/%252e%252e/api/x",
                      "/public/..;jsessionid=1/api/x", "/public/%2e%2e%3b/api/x", "/public/%252f/api", "/public/%255c"])
    func refusedPaths(raw: String) {
        #expect(ProxyPath.normalizedForMatching(raw[...]) == nil)
    }

    /// The one-pass check that lets everyday paths skip normalization, against the full
    /// segment-by-segment normalization on random paths.
    @Test func alreadyNormalPathsNormalizeToThemselves() {
        var generator = SystemRandomNumberGenerator()
        let pieces = ["/", "/", "a", "api", ".", "..", "...", "%2e", "%2F", "%41", "%", ";", "\\", "\u{0}", "é", "-", "~", "x.y"]
        var normal = 0
        for _ in 0..<20_000 {
            let path = (0..<Int.random(in: 0...7, using: &generator)).map { _ in pieces.randomElement(using: &generator)! }.joined()
            let slow = ProxyPath.normalizedBySegments(Substring(path))
            // The same bytes as a slice of a longer string: the check reads the slice only.
            #expect(ProxyPath.isAlreadyNormal(("x" + path + "/..").dropFirst().dropLast(3).utf8)
                    == ProxyPath.isAlreadyNormal(Substring(path).utf8), "\(path)")
            if ProxyPath.isAlreadyNormal(Substring(path).utf8) {
                normal += 1
                #expect(slow == path, "\(path)")
            }
            #expect(ProxyPath.normalizedForMatching(Substring(path)) == slow, "\(path)")
        }
        // About 3 % of these random paths are already normal (576 to ~1,000 seen in 20,000).
        #expect(normal > 100, "the fast path is taken")
    }
}
