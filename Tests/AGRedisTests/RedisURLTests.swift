import AGRedis
import Testing

@Suite struct RedisURLTests {
    struct Valid: Sendable, CustomTestStringConvertible {
        let text: String
        let expected: RedisURL
        var testDescription: String { text }
    }

    static let valid: [Valid] = [
        .init(text: "redis://localhost", expected: .init(endpoint: .tcp(host: "localhost", port: 6379))),
        .init(text: "redis://127.0.0.1:6380", expected: .init(endpoint: .tcp(host: "127.0.0.1", port: 6380))),
        .init(text: "redis://127.0.0.1:6380/", expected: .init(endpoint: .tcp(host: "127.0.0.1", port: 6380))),
        .init(text: "redis://redis.internal:7000/5",
              expected: .init(endpoint: .tcp(host: "redis.internal", port: 7000), database: 5)),
        .init(text: "REDIS://h/2", expected: .init(endpoint: .tcp(host: "h", port: 6379), database: 2)),
        .init(text: "redis://:s3cret@h:1/0",
              expected: .init(endpoint: .tcp(host: "h", port: 1), password: "s3cret")),
        .init(text: "redis://gateway:s3cret@h/3",
              expected: .init(endpoint: .tcp(host: "h", port: 6379), username: "gateway", password: "s3cret", database: 3)),
        .init(text: "redis://:p%40ss%3Aw%2Frd@h",
              expected: .init(endpoint: .tcp(host: "h", port: 6379), password: "p@ss:w/rd")),
        .init(text: "redis://:@h", expected: .init(endpoint: .tcp(host: "h", port: 6379), password: "")),
        .init(text: "redis://[::1]:6390/1", expected: .init(endpoint: .tcp(host: "::1", port: 6390), database: 1)),
        .init(text: "redis://[::1]", expected: .init(endpoint: .tcp(host: "::1", port: 6379))),
        .init(text: "unix:///run/redis/redis.sock", expected: .init(endpoint: .unix(path: "/run/redis/redis.sock"))),
        .init(text: "unix:///tmp/r.sock?db=4", expected: .init(endpoint: .unix(path: "/tmp/r.sock"), database: 4)),
        .init(text: "unix://:pw@/tmp/r.sock",
              expected: .init(endpoint: .unix(path: "/tmp/r.sock"), password: "pw")),
        .init(text: "redis://redis-0.redis.default.svc.cluster.local:6379",
              expected: .init(endpoint: .tcp(host: "redis-0.redis.default.svc.cluster.local", port: 6379))),
        .init(text: "redis-cluster://10.0.0.1:7000,10.0.0.2:7001,[fd00::3]",
              expected: .init(topology: .cluster(seeds: [.tcp(host: "10.0.0.1", port: 7000), .tcp(host: "10.0.0.2", port: 7001),
                                                         .tcp(host: "fd00::3", port: 6379)]))),
        .init(text: "redis-cluster://gw:p%40ss@redis-cluster.internal:6379/",
              expected: .init(topology: .cluster(seeds: [.tcp(host: "redis-cluster.internal", port: 6379)]),
                              username: "gw", password: "p@ss")),
        .init(text: "redis-sentinel://s1,s2:26380,10.0.0.9:5000/mymaster",
              expected: .init(topology: .sentinel(sentinels: [.tcp(host: "s1", port: 26379), .tcp(host: "s2", port: 26380),
                                                              .tcp(host: "10.0.0.9", port: 5000)], masterName: "mymaster"))),
        .init(text: "redis-sentinel://:pw@s1:26379/my-master.1?db=3",
              expected: .init(topology: .sentinel(sentinels: [.tcp(host: "s1", port: 26379)], masterName: "my-master.1"),
                              password: "pw", database: 3)),
    ]

    @Test(arguments: valid)
    func parsesValidURL(_ example: Valid) throws {
        #expect(try RedisURL(parsing: example.text) == example.expected)
    }

    struct Invalid: Sendable, CustomTestStringConvertible {
        let text: String
        let error: RedisURLError
        var testDescription: String { text }
    }

    static let invalid: [Invalid] = [
        .init(text: "", error: .missingScheme),
        .init(text: "localhost:6379", error: .missingScheme),
        .init(text: "http://localhost", error: .unsupportedScheme("http")),
        .init(text: "rediss://localhost", error: .unsupportedScheme("rediss")),
        .init(text: "redis://", error: .missingHost),
        .init(text: "redis://:6379", error: .missingHost),
        .init(text: "redis://:pw@/0", error: .missingHost),
        .init(text: "redis://h:0", error: .invalidPort("0")),
        .init(text: "redis://h:65536", error: .invalidPort("65536")),
        .init(text: "redis://h:abc", error: .invalidPort("abc")),
        .init(text: "redis://h:", error: .invalidPort("")),
        .init(text: "redis://h/x", error: .invalidDatabase("x")),
        .init(text: "redis://h/-1", error: .invalidDatabase("-1")),
        .init(text: "redis://h/1/2", error: .invalidDatabase("1/2")),
        .init(text: "redis://user@h", error: .missingPassword),
        .init(text: "redis://:%zz@h", error: .invalidPercentEncoding),
        .init(text: "redis://:%4@h", error: .invalidPercentEncoding),
        .init(text: "redis://[::1", error: .invalidHost("[::1")),
        .init(text: "redis://[::1]x", error: .invalidHost("[::1]x")),
        .init(text: "redis://h/0?timeout=1", error: .unexpectedQuery),
        .init(text: "unix://", error: .missingSocketPath),
        .init(text: "unix://relative.sock", error: .missingSocketPath),
        .init(text: "unix:///tmp/r.sock?db=x", error: .invalidDatabase("x")),
        .init(text: "unix:///tmp/r.sock?timeout=1", error: .unexpectedQuery),
        .init(text: "redis://a:1,b:2", error: .multipleHosts),
        .init(text: "redis://bad_host!:6379", error: .invalidHost("bad_host!")),
        .init(text: "redis://-lead.example", error: .invalidHost("-lead.example")),
        .init(text: "redis://a..b", error: .invalidHost("a..b")),
        .init(text: "redis://[zz::1]", error: .invalidHost("[zz::1]")),
        .init(text: "redis://h:+80", error: .invalidPort("+80")),
        .init(text: "redis-cluster://", error: .missingHost),
        .init(text: "redis-cluster://a:1,,b:2", error: .missingHost),
        .init(text: "redis-cluster://a:1,a:1", error: .duplicateHost("a:1")),
        .init(text: "redis-cluster://a:1/2", error: .clusterDatabase),
        .init(text: "redis-cluster://a:1?db=2", error: .unexpectedQuery),
        .init(text: "redis-sentinel://s1:26379", error: .missingMasterName),
        .init(text: "redis-sentinel://s1:26379/", error: .missingMasterName),
        .init(text: "redis-sentinel://s1:26379/my/master", error: .invalidMasterName("my/master")),
        .init(text: "redis-sentinel://s1:26379/m?db=x", error: .invalidDatabase("x")),
        .init(text: "redis-sentinel://s1:26379/m?timeout=1", error: .unexpectedQuery),
        .init(text: "redis-sentinel://user@s1/m", error: .missingPassword),
    ]

    @Test(arguments: invalid)
    func rejectsInvalidURL(_ example: Invalid) {
        #expect(throws: example.error) { try RedisURL(parsing: example.text) }
    }

    @Test func errorsExplainThemselves() {
        #expect(RedisURLError.invalidPort("0").description.contains("1-65535"))
        #expect(RedisURLError.unsupportedScheme("rediss").description.contains("redis://"))
    }

    @Test func descriptionHidesPassword() throws {
        let url = try RedisURL(parsing: "redis://gateway:s3cret@10.0.0.5:6380/2")
        #expect(url.description == "redis://gateway:***@10.0.0.5:6380/2")
        #expect(try RedisURL(parsing: "unix:///tmp/r.sock?db=3").description == "unix:///tmp/r.sock?db=3")
        #expect(try RedisURL(parsing: "redis-cluster://:s3cret@a:1,[::1]:2").description == "redis-cluster://:***@a:1,[::1]:2")
        #expect(try RedisURL(parsing: "redis-sentinel://u:s3cret@s1,s2:9/m?db=2").description
            == "redis-sentinel://u:***@s1:26379,s2:9/m?db=2")
        for text in ["redis-cluster://:s3cret@a:1", "redis-sentinel://:s3cret@s1/m"] {
            #expect(!(try RedisURL(parsing: text).description.contains("s3cret")))
        }
    }
}
