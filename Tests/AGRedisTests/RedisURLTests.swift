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
    }
}
