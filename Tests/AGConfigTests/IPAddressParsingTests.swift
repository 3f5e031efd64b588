import AGTestSupport
import Testing
@testable import AGConfig

/// The one-pass IPv4 parser (which runs for peer addresses on the request path) against a
/// plain reference of the rules it replaced: split on `.`, four parts of one to three ASCII
/// digits, no leading zero, each at most 255.
@Suite struct IPAddressParsingTests {
    static func reference(_ text: String) -> UInt32? {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4 else { return nil }
        var value: UInt32 = 0
        for part in parts {
            guard (1...3).contains(part.count), part.allSatisfy({ $0.isASCII && $0.isNumber }),
                  part == "0" || !part.hasPrefix("0"), let octet = UInt32(part), octet <= 255 else { return nil }
            value = value << 8 | octet
        }
        return value
    }

    static func parsed(_ text: String) -> UInt32? {
        if case .v4(let value)? = IPAddress(text) { return value }
        return nil
    }

    @Test(arguments: [
        ("127.0.0.1", UInt32(0x7F00_0001)), ("0.0.0.0", 0), ("255.255.255.255", 0xFFFF_FFFF), ("10.20.30.40", 0x0A14_1E28),
    ])
    func accepted(_ text: String, _ value: UInt32) {
        #expect(Self.parsed(text) == value)
    }

    @Test(arguments: ["", ".", "1.2.3", "1.2.3.4.5", "1..2.3", "01.2.3.4", "1.2.3.04", "256.1.1.1", "1.2.3.1000", "1.2.3.-1",
                      "1.2.3.4 ", " 1.2.3.4", "1.2.3.a", "1.2.3.٣", "1.2.3.4\u{301}", "1.2.3.", ".1.2.3", "00.1.1.1"])
    func refused(_ text: String) {
        #expect(Self.parsed(text) == nil)
        #expect(Self.reference(text) == nil)
    }

    /// RFC 5952 spellings; an IPv4-mapped address ends in dotted decimal (section 5: the
    /// access log said `::ffff:102:304` for `::ffff:1.2.3.4`, a sweep of stop 35's fixes).
    @Test(arguments: [
        ("::ffff:1.2.3.4", "::ffff:1.2.3.4"), ("::FFFF:102:304", "::ffff:1.2.3.4"), ("2001:db8:0:0:0:0:0:1", "2001:db8::1"),
        ("::1", "::1"), ("::", "::"), ("fe80::1:0:0:1", "fe80::1:0:0:1"), ("::fffe:1.2.3.4", "::fffe:102:304"),
    ])
    func v6Descriptions(_ text: String, _ spelled: String) throws {
        #expect(try #require(IPAddress(text)).description == spelled)
    }

    @Test func agreesWithTheReferenceOnRandomText() {
        var generator = SystemRandomNumberGenerator()
        let alphabet: [String] = ["0", "1", "2", "5", "9", ".", ".", "25", "255", "256", "00", "a", " ", "٣", "\u{301}", ":"]
        for _ in 0..<20_000 {
            let text = (0..<Int.random(in: 0...9, using: &generator)).map { _ in alphabet.randomElement(using: &generator)! }.joined()
            guard !text.contains(":") else { continue }
            #expect(Self.parsed(text) == Self.reference(text), "\(text)")
        }
    }

    @Test func peerTrustFromText() throws {
        let (_, trusting) = try ConfigDefaultsTests.loadMinimal(
            gateway: ConfigFixture.minimalGateway + "server:\n  trusted_proxies: [10.0.0.0/8]\n")
        #expect(trusting.gateway.server.trusts(peer: "10.1.2.3"))
        #expect(!trusting.gateway.server.trusts(peer: "11.1.2.3"))
        #expect(!trusting.gateway.server.trusts(peer: "not an address"))
        let (_, plain) = try ConfigDefaultsTests.loadMinimal()
        #expect(!plain.gateway.server.trusts(peer: "10.1.2.3"))
    }
}

/// Which address of `X-Forwarded-For` the per-IP buckets use behind a trusted proxy (stop 34,
/// independent sweep: entries that were no bare address were dropped before the walk, so a
/// proxy writing `ip:port` or `unknown` let the client's own entry further left be taken).
@Suite struct ForwardedClientAddressTests {
    static let peer = IPAddress("10.0.0.5")!

    static func client(_ lines: [String], peer: IPAddress = peer) throws -> String {
        let (_, config) = try ConfigDefaultsTests.loadMinimal(
            gateway: ConfigFixture.minimalGateway + "server:\n  trusted_proxies: [10.0.0.0/8, \"2001:db8::/32\"]\n")
        return config.gateway.server.clientAddress(peer: peer, forwardedFor: lines).description
    }

    @Test("the nearest untrusted entry, read from the right", arguments: [
        (["203.0.113.7"], "203.0.113.7"),
        (["198.51.100.1, 203.0.113.7"], "203.0.113.7"),
        (["198.51.100.1, 203.0.113.7, 10.1.1.1"], "203.0.113.7"),
        (["198.51.100.1", "203.0.113.7, 10.1.1.1"], "203.0.113.7"),
        // Proxies that write the port, IPv6 in brackets, or both.
        (["198.51.100.1, 203.0.113.7:8080"], "203.0.113.7"),
        (["198.51.100.1, [2001:db9::7]:443"], "2001:db9::7"),
        (["198.51.100.1, [2001:db9::7]"], "2001:db9::7"),
        (["198.51.100.1,2001:db9::7"], "2001:db9::7"),
        // Empty list elements are no entries (RFC 9110 section 5.6.1).
        (["198.51.100.1, , 203.0.113.7 ,"], "203.0.113.7"),
        // An entry that is no address stops the walk at the hop that wrote it.
        (["198.51.100.1, unknown"], "10.0.0.5"),
        (["198.51.100.1, garbage, 10.1.1.1"], "10.1.1.1"),
        (["198.51.100.1", "garbage"], "10.0.0.5"),
        (["198.51.100.1, 203.0.113.7:99999x"], "10.0.0.5"),
        (["198.51.100.1, 203.0.113.7:99999"], "10.0.0.5"),
        (["198.51.100.1, [2001:db9::7]:65536"], "10.0.0.5"),
        (["198.51.100.1, 203.0.113.7:65535"], "203.0.113.7"),
        (["198.51.100.1, 203.0.113.7:"], "10.0.0.5"),
        (["198.51.100.1, [203.0.113.7]:80"], "10.0.0.5"),
        (["198.51.100.1, 2001:db9::7:80:1:2:3:4:5"], "10.0.0.5"),
        // Commas and spaces are bytes: a code point that clusters with the comma after it
        // (U+0600, a prepended concatenation mark) does not hide the separator (stop 34, sweep
        // of this stop's changes: the proxy's element was swallowed and its bucket taken).
        (["6.6.6.6\u{600}, 203.0.113.7"], "203.0.113.7"),
        (["6.6.6.6\u{600},203.0.113.7"], "203.0.113.7"),
        (["203.0.113.7\u{301}"], "10.0.0.5"),
        // Every entry trusted: the farthest.
        (["10.9.9.9, 10.1.1.1"], "10.9.9.9"),
        ([], "10.0.0.5"),
    ])
    func chosen(lines: [String], expected: String) throws {
        #expect(try Self.client(lines) == expected)
    }

    @Test func anUntrustedPeerIsTheClient() throws {
        #expect(try Self.client(["203.0.113.7"], peer: IPAddress("192.0.2.1")!) == "192.0.2.1")
    }
}
