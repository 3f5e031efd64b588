import AGRedis
import AGFormats
import Testing

@testable import AGConfig

/// Notations inside configuration values: durations, sizes, addresses, URLs, JSON values.
@Suite struct ConfigSyntaxTests {
    static let durations: [(String, Duration?)] = [
        ("250ms", .milliseconds(250)), ("30s", .seconds(30)), ("5m", .seconds(300)), ("1h", .seconds(3_600)),
        ("7d", .seconds(604_800)), ("0s", .zero), ("90m", .seconds(5_400)), ("1000ms", .seconds(1)),
        ("30", nil), ("", nil), ("s", nil), ("1.5s", nil), ("-5s", nil), ("5 s", nil), ("5S", nil), ("1w", nil),
        ("1h30m", nil), ("5sec", nil), ("999999999999999999d", nil),
    ]

    @Test(arguments: durations)
    func duration(_ text: String, _ expected: Duration?) {
        #expect(ConfigUnits.parseDuration(text) == expected)
    }

    static let sizes: [(String, Int?)] = [
        ("1048576", 1_048_576), ("64KiB", 65_536), ("1MiB", 1_048_576), ("100MiB", 104_857_600),
        ("1GiB", 1_073_741_824), ("512B", 512), ("0", 0), ("2TiB", 2 << 40),
        ("64KB", nil), ("1M", nil), ("1mib", nil), ("1.5MiB", nil), ("-1", nil), ("MiB", nil), ("", nil),
        ("1 MiB", nil), ("99999999999GiB", nil),
    ]

    @Test(arguments: sizes)
    func byteSize(_ text: String, _ expected: Int?) {
        #expect(ConfigUnits.parseByteSize(text) == expected)
    }

    static let listenAddresses: [(String, String?)] = [
        ("0.0.0.0:8080", "0.0.0.0:8080"), ("127.0.0.1:0", "127.0.0.1:0"), ("[::]:8080", "[::]:8080"),
        ("[::1]:9901", "[::1]:9901"), ("localhost:80", "localhost:80"), ("gw-1.internal:443", "gw-1.internal:443"),
        ("::1:8080", nil), ("8080", nil), (":8080", nil), ("host", nil), ("host:", nil), ("host:65536", nil),
        ("host:080", nil), ("[::1]8080", nil), ("[10.0.0.1]:80", nil), ("-bad-:80", nil), ("a b:80", nil),
        ("256.0.0.1:80", nil),
    ]

    @Test(arguments: listenAddresses)
    func listenAddress(_ text: String, _ expected: String?) {
        #expect(ListenAddress(text)?.description == expected)
    }

    /// Pairs of listeners and why they cannot be bound side by side, in either order (`nil`:
    /// they can), as Linux decides with SO_REUSEADDR on both and IPv6 sockets dual-stack.
    static let listenerClashes: [(String, String, String?)] = [
        ("127.0.0.1:8080", "127.0.0.1:8080", "both bind 127.0.0.1:8080"),
        ("localhost:8080", "127.0.0.1:8080", "both bind 127.0.0.1:8080"),
        ("[::ffff:127.0.0.1]:8080", "127.0.0.1:8080", "both bind 127.0.0.1:8080"),
        ("[::1]:8080", "[::1]:8080", "both bind [::1]:8080"),
        ("0.0.0.0:8080", "127.0.0.2:8080", "0.0.0.0 takes port 8080 on every IPv4 address"),
        ("10.1.2.3:8080", "0.0.0.0:8080", "0.0.0.0 takes port 8080 on every IPv4 address"),
        ("0.0.0.0:8080", "[::ffff:127.0.0.1]:8080", "0.0.0.0 takes port 8080 on every IPv4 address"),
        ("[::]:8080", "0.0.0.0:8080", "[::] takes port 8080 on every address, IPv4 included"),
        ("127.0.0.1:8080", "[::]:8080", "[::] takes port 8080 on every address, IPv4 included"),
        ("[::]:8080", "[::1]:8080", "[::] takes port 8080 on every address, IPv4 included"),
        ("127.0.0.1:8080", "127.0.0.1:8081", nil), ("127.0.0.1:8080", "127.0.0.2:8080", nil),
        ("0.0.0.0:8080", "[::1]:8080", nil), ("[::1]:8080", "127.0.0.1:8080", nil),
        ("127.0.0.1:0", "127.0.0.1:0", nil), ("[::]:0", "0.0.0.0:0", nil),
        ("gw.example.com:8080", "gw.example.com:8080", nil),
    ]

    @Test(arguments: listenerClashes)
    func listenerClash(_ first: String, _ second: String, _ expected: String?) throws {
        let a = try #require(ListenAddress(first)), b = try #require(ListenAddress(second))
        #expect(a.clash(with: b) == expected)
        #expect(b.clash(with: a) == expected)
    }

    static let cidrs: [(String, String?)] = [
        ("10.0.0.0/8", "10.0.0.0/8"), ("192.168.1.7", "192.168.1.7/32"), ("0.0.0.0/0", "0.0.0.0/0"),
        ("fd00::/8", "fd00::/8"), ("::1", "::1/128"), ("2001:db8::/32", "2001:db8::/32"),
        ("::ffff:10.0.0.0/104", "::ffff:10.0.0.0/104"), ("::FFFF:a00:0/104", "::ffff:10.0.0.0/104"), ("2001:DB8:0:0:0:0:0:0/32", "2001:db8::/32"),
        ("10.0.0.1/8", nil), ("10.0.0.0/33", nil), ("10.0.0/8", nil), ("010.0.0.0/8", nil), ("fd00::/129", nil),
        ("fd00::1::/64", nil), ("1:2:3:4:5:6:7:8:9/128", nil), ("10.0.0.0/", nil), ("10.0.0.0/8/8", nil),
        ("fe80::1%eth0", nil), ("", nil),
    ]

    @Test(arguments: cidrs)
    func cidrBlock(_ text: String, _ expected: String?) {
        #expect(CIDRBlock(text)?.description == expected)
    }

    static let membership: [(String, String, Bool)] = [
        ("10.0.0.0/8", "10.255.1.2", true), ("10.0.0.0/8", "11.0.0.1", false),
        ("10.0.0.0/8", "::ffff:10.1.2.3", true), ("fd00::/8", "fd12::1", true), ("fd00::/8", "fe00::1", false),
        ("0.0.0.0/0", "203.0.113.9", true), ("::/0", "10.0.0.1", false), ("192.0.2.1", "192.0.2.1", true),
    ]

    @Test(arguments: membership)
    func cidrContains(_ block: String, _ address: String, _ expected: Bool) throws {
        let block = try #require(CIDRBlock(block))
        let address = try #require(IPAddress(address))
        #expect(block.contains(address) == expected)
    }

    static let upstreams: [(String, String?)] = [
        ("http://127.0.0.1:9000", "http://127.0.0.1:9000"), ("http://api.internal", "http://api.internal:80"),
        ("http://api.internal:8080/base/", "http://api.internal:8080/base"), ("http://[::1]:9000/v1", "http://[::1]:9000/v1"),
        ("https://api.example.com", "https://api.example.com:443"), ("https://10.0.0.9:8443/v2/", "https://10.0.0.9:8443/v2"),
        ("ftp://x", nil), ("HTTPS://api.example.com", nil), ("https://", nil), ("https://user@host", nil), ("http://", nil), ("http://user@host", nil),
        ("http://host:0", nil), ("http://host/a?b", nil), ("http://host/../x", nil), ("127.0.0.1:9000", nil),
        // Dot segments in any spelling, an encoded NUL, bad escapes, bytes outside RFC 3986's
        // path characters (stop 36's sweep); escapes and sub-delims that are path characters pass.
        ("http://h/%2e%2e/x", nil), ("http://h/%2E/x", nil), ("http://h/.%2e", nil), ("http://h/%00x", nil), ("http://h/%zz", nil),
        ("http://h/%4", nil), ("http://h/a\"b", nil), ("http://h/a<b>", nil), ("http://h/a{b}", nil), ("http://h/a|b", nil),
        ("http://h/a%2f..%2fb", nil), ("http://h/x%2F%2e%2e", nil), ("http://h/..%5cx", nil), ("http://h/a%2Fb", "http://h:80/a%2Fb"),
        ("http://h/%41b/v1;x=1/a:b/~u/", "http://h:80/%41b/v1;x=1/a:b/~u"), ("http://h/.well-known/..x", "http://h:80/.well-known/..x"),
    ]

    @Test(arguments: upstreams)
    func upstreamURL(_ text: String, _ expected: String?) {
        #expect((try? UpstreamURL.parse(text).get())?.description == expected)
    }

    @Test func httpsUpstreamsSayTheyAreTLS() throws {
        #expect(try UpstreamURL.parse("https://api.example.com").get().isTLS)
        #expect(try UpstreamURL.parse("http://api.example.com").get().isTLS == false)
        #expect(UpstreamURL.parse("ftp://api.example.com") == .failure(.scheme))
        #expect(UpstreamURL.parse("ftp://u:pw@api.example.com") == .failure(.credentials))
        #expect(UpstreamURL.parse("http://u:pw/x@api.example.com") == .failure(.credentials))
        #expect(UpstreamURL.parse("http://api.example.com/a#b") == .failure(.forbiddenCharacter))
        #expect(UpstreamURL.parse("http://host:0") == .failure(.authority))
        #expect(UpstreamURL.parse("http://host/../x") == .failure(.basePath))
    }

    static let redisURLs: [(String, String?, String?)] = [
        ("redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0", nil),
        ("redis://localhost", "redis://localhost:6379/0", nil),
        ("redis://:s%40cret@10.0.0.5:6380/3", "redis://:***@10.0.0.5:6380/3", "s@cret"),
        ("redis://app:pw@[::1]/2", "redis://app:***@[::1]:6379/2", "pw"),
        ("unix:///run/redis.sock", "unix:///run/redis.sock", nil),
        ("unix:///run/redis.sock?db=4", "unix:///run/redis.sock?db=4", nil),
        ("rediss://host", nil, nil), ("http://host", nil, nil), ("redis://host:notaport", nil, nil),
        ("redis://pw@host", nil, nil), ("redis://host/x", nil, nil), ("unix://relative.sock", nil, nil),
        ("redis://:%zz@host", nil, nil),
    ]

    @Test(arguments: redisURLs)
    func redisEndpoint(_ text: String, _ expected: String?, _ password: String?) {
        let endpoint = try? RedisURL(parsing: text)
        #expect(endpoint?.description == expected)
        #expect(endpoint?.password == password)
    }

    @Test func problemRendering() {
        #expect(ConfigProblem(file: "conf/tenants/acme.yaml", line: 7, keyPath: "routes[1].auth",
                              message: #"expected one of required, none, got "maybe""#).description
                == #"conf/tenants/acme.yaml:7: routes[1].auth: expected one of required, none, got "maybe""#)
        #expect(ConfigProblem(file: "conf/x.yaml", line: nil, keyPath: "", message: "file is a directory").description
                == "conf/x.yaml: file is a directory")
        #expect(ConfigKeyPath.root.key("routes").index(1).key("auth").description == "routes[1].auth")
    }
}
