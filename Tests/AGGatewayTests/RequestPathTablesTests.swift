import AGConfig
import AGFormats
import AGHTTP
import AGTestSupport
import Testing

@testable import AGGateway

/// Tables and generators the request path uses instead of building strings: the tenant index
/// over header bytes, and request ids.
@Suite struct RequestPathTablesTests {
    /// The gateway's own paths match exactly, by length then bytes: not a path of the same
    /// length that differs, not a prefix, an extension, another case or a trailing slash.
    @Test func ownRoutesMatchTheirPathsOnly() {
        for route in OwnRoute.allCases {
            let path = route.path
            #expect(OwnRoute(path[...]) == route)
            #expect(OwnRoute(("/x" + path)[...].dropFirst(2)) == route, "a substring of a longer string")
            var changed = Array(path.utf8)
            changed[changed.count - 1] ^= 0x01
            #expect(OwnRoute(String(decoding: changed, as: UTF8.self)[...]) == nil)
            #expect(OwnRoute(path.dropLast()) == nil)
            #expect(OwnRoute((path + "/")[...]) == nil)
            #expect(OwnRoute(path.uppercased()[...]) == nil)
        }
        for path in ["", "/", "/api/bench", "/api/v1/attestation/", "/api/v1/attestation/challengf", "/healthy"] {
            #expect(OwnRoute(path[...]) == nil, "\(path)")
        }
    }

    @Test func tenantIndexFindsWhatTheAppIDLookupFinds() throws {
        let teams = ["AAAAAAAAA1", "AAAAAAAAA2", "BBBBBBBBB1"]
        let bundles = ["com.example.app", "com.example.ap", "com.example.appx", "com.other.app"]
        var files: [String: String] = [:]
        for (index, team) in teams.enumerated() {
            for bundle in bundles.prefix(index + 2) {
                files["\(team)-\(bundle).yaml"] = TestGateway.tenantYAML(teamID: team, bundleID: bundle)
            }
        }
        let directory = try TestConfigDirectory(tenants: files)
        let snapshot = try GatewaySnapshot(config: try ConfigLoader.load(path: directory.gatewayPath), generation: 1, adminToken: nil)
        #expect(snapshot.tenants.count == 2 + 3 + 4)
        let probes = teams + ["AAAAAAAAA", "", "aaaaaaaaa1", "AAAAAAAAA1.com"]
        let bundleProbes = bundles + ["", "example.app", "app", "com.example.app.", "COM.EXAMPLE.APP"]
        var found = 0
        for team in probes {
            for bundle in bundleProbes {
                let fields = try HTTPFields(parsing: Array("X-Team-ID: \(team)\r\nX-Bundle-ID: \(bundle)\r\n\r\n".utf8))
                let (teamRange, bundleRange) = try #require(try TenantIndex.tenantFields(fields))
                let byBytes = snapshot.tenant(team: teamRange, bundle: bundleRange, in: fields)
                let byText = snapshot.tenant(teamID: team, bundleID: bundle)
                #expect(byBytes === byText, "\(team) / \(bundle)")
                if byBytes != nil { found += 1 }
            }
        }
        // Each of the 9 tenants from its own pair, and AAAAAAAAA1 / com.example.app once more
        // from "AAAAAAAAA1.com" / "example.app": the App ID joins the two with a dot, for the
        // text lookup and the byte lookup alike.
        #expect(found == 10)
    }

    /// Enough tenants that the open-addressed table's probes run through clusters: every
    /// tenant is found from its own field bytes, and near misses (a byte more, less or
    /// different) find nothing.
    @Test func tenantIndexFindsEveryTenantOfACrowdedTable() throws {
        var files: [String: String] = [:]
        let pairs = (0..<300).map { index in
            let digits = String(index)
            return ("T" + String(repeating: "0", count: 9 - digits.count) + digits, "com.example.app\(index % 7)")
        }
        for (team, bundle) in pairs { files["\(team)-\(bundle).yaml"] = TestGateway.tenantYAML(teamID: team, bundleID: bundle) }
        let directory = try TestConfigDirectory(tenants: files)
        let snapshot = try GatewaySnapshot(config: try ConfigLoader.load(path: directory.gatewayPath), generation: 1, adminToken: nil)
        func lookup(_ team: String, _ bundle: String) throws -> Tenant? {
            let fields = try HTTPFields(parsing: Array("X-Team-ID: \(team)\r\nX-Bundle-ID: \(bundle)\r\n\r\n".utf8))
            let (teamRange, bundleRange) = try #require(try TenantIndex.tenantFields(fields))
            return snapshot.tenant(team: teamRange, bundle: bundleRange, in: fields)
        }
        for (team, bundle) in pairs {
            #expect(try lookup(team, bundle)?.appID == "\(team).\(bundle)")
            #expect(try lookup(team + "0", bundle) == nil)
            #expect(try lookup(team, String(bundle.dropLast())) == nil)
            #expect(try lookup("X" + team.dropFirst(), bundle) == nil)
            #expect(try lookup(String(team.dropLast()), bundle) == nil)
        }
    }

    @Test func tenantFieldsAreFoundInAnyCaseAndRefusedWhenRepeatedOrAlone() throws {
        let fields = try HTTPFields(parsing: Array("x-team-id: T1\r\nHost: h\r\nX-BUNDLE-ID: b1\r\n\r\n".utf8))
        let (team, bundle) = try #require(try TenantIndex.tenantFields(fields))
        #expect(String(decoding: fields.storage[team], as: UTF8.self) == "T1")
        #expect(String(decoding: fields.storage[bundle], as: UTF8.self) == "b1")
        #expect(try TenantIndex.tenantFields(try HTTPFields(parsing: Array("Host: h\r\n\r\n".utf8))) == nil)
        #expect(throws: TenantIndex.FieldProblem.alone("X-Team-ID")) {
            try TenantIndex.tenantFields(try HTTPFields(parsing: Array("X-Team-ID: T1\r\n\r\n".utf8)))
        }
        #expect(throws: TenantIndex.FieldProblem.alone("X-Bundle-ID")) {
            try TenantIndex.tenantFields(try HTTPFields(parsing: Array("x-bundle-id: b1\r\n\r\n".utf8)))
        }
        #expect(throws: TenantIndex.FieldProblem.repeated("X-Team-ID")) {
            try TenantIndex.tenantFields(try HTTPFields(parsing: Array("x-team-id: T1\r\nX-Bundle-ID: b1\r\nX-Team-ID: T2\r\n\r\n".utf8)))
        }
        #expect(throws: TenantIndex.FieldProblem.repeated("X-Bundle-ID")) {
            try TenantIndex.tenantFields(try HTTPFields(parsing: Array("X-Bundle-ID: b1\r\nx-bundle-id: b1\r\n\r\n".utf8)))
        }
    }

    /// A generator that replays fixed words.
    struct Replay: RandomNumberGenerator {
        var words: [UInt64]
        mutating func next() -> UInt64 { words.removeFirst() }
    }

    @Test func requestIDsAreVersion4UUIDsOfTheGeneratorsBytes() {
        var generator = Replay(words: [0x0123_4567_89AB_CDEF, 0xFEDC_BA98_7654_3210])
        // Bytes least significant first: ef cd ab 89 67 45 23 01 | 10 32 54 76 98 ba dc fe,
        // with the version nibble (byte 6) and the variant bits (byte 8) set.
        #expect(RequestID.newUUID(using: &generator) == "efcdab89-6745-4301-9032-547698badcfe")
        var random = RequestIDGenerator()
        for _ in 0..<100 {
            let id = RequestID.newUUID(using: &random)
            #expect(id.utf8.count == 36 && RequestID.isSane(id))
            #expect(Array(id.utf8)[14] == UInt8(ascii: "4"))
            #expect("89ab".utf8.contains(Array(id.utf8)[19]))
        }
        // Against a byte-by-byte spelling of the same two words (version and variant set).
        var words = SystemRandomNumberGenerator()
        for _ in 0..<1_000 {
            let pair: [UInt64] = [words.next(), words.next()]
            var replay = Replay(words: pair)
            let first: UInt64 = pair[0] & ~(0xF0 << 48) | (0x40 << 48)
            let second: UInt64 = pair[1] & ~0xC0 | 0x80
            var hex = ""
            for word in [first, second] {
                for index in 0..<8 {
                    let byte = UInt8(truncatingIfNeeded: word >> (8 * UInt64(index)))
                    hex += (byte < 16 ? "0" : "") + String(byte, radix: 16)
                }
            }
            let digits = Array(hex)
            let groups: [Range<Int>] = [0..<8, 8..<12, 12..<16, 16..<20, 20..<32]
            let expected = groups.map { String(digits[$0]) }.joined(separator: "-")
            #expect(RequestID.newUUID(using: &replay) == expected)
        }
    }

    /// A request's id kept inline spells the same UUID as the string form, 36 bytes and no
    /// more (its last word has four spare bytes), into a head and into an access line; an
    /// offered id is written as received.
    @Test func inlineRequestIDsSpellTheSameBytes() {
        func written(_ id: RequestIdentifier) -> [UInt8] {
            var writer = HTTPHeadWriter()
            writer.append("<")
            id.write(to: &writer)
            writer.append(">")
            return writer.bytes
        }
        var generator = Replay(words: [0x0123_4567_89AB_CDEF, 0xFEDC_BA98_7654_3210])
        let generated = RequestIdentifier(RequestID.newUUIDText(using: &generator))
        #expect(generated.description == "efcdab89-6745-4301-9032-547698badcfe")
        #expect(written(generated) == Array("<efcdab89-6745-4301-9032-547698badcfe>".utf8))
        let source = RequestIDSource()
        let fresh = source.resolve(nil)
        #expect(fresh.description.utf8.count == 36 && RequestID.isSane(fresh.description))
        #expect(written(fresh) == Array("<\(fresh.description)>".utf8))
        #expect(source.resolve(nil) != fresh)
        #expect(written(source.resolve("abc-123_x.y:z")) == Array("<abc-123_x.y:z>".utf8))
        #expect(source.resolve("bad id").description.utf8.count == 36)
        // In an access line, where the id is stored a word at a time into reserved room.
        let reference = RecordingAccessLog()
        var clock = RFC3339Clock()
        for id in [generated, fresh] {
            let line = AccessLine(unixMilliseconds: 1_796_022_230_123, requestID: id, method: "GET", path: "/p", tenant: "T.b",
                                  route: "proxy", status: 200, code: nil, durationMicroseconds: 173, upstreamMicroseconds: 90,
                                  client: "127.0.0.1")
            reference.appendAccess(line)
            var bytes: [UInt8] = []
            AccessLogBuffer.write(line, clock: &clock, to: &bytes)
            #expect(String(decoding: bytes, as: UTF8.self) == reference.lines.last)
        }
    }

    /// A worker counts runs of requests with the same labels in the last series' slot, without
    /// hashing them; the counts must come out as if every request were hashed, whatever the order.
    @Test func requestCountsSurviveTheLastSeriesShortcut() {
        let registry = MetricsRegistry()
        let worker = registry.makeWorkerMetrics()
        // Neighbours differ in one label each, the code included (nil, and two codes of one status).
        let labels: [(String, String, Int, String?)] = [("A.app", "proxy", 200, nil), ("A.app", "proxy", 429, "rate_limited"),
                                                         ("B.app", "proxy", 200, nil), ("A.app", "challenge", 200, nil),
                                                         ("A.app", "proxy", 503, nil), ("A.app", "proxy", 503, "store_unavailable"),
                                                         ("A.app", "proxy", 503, "upstream_unavailable")]
        var expected = [Int](repeating: 0, count: labels.count)
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2_000 {
            let index = Int.random(in: 0..<labels.count, using: &generator)
            for _ in 0..<Int.random(in: 1...4, using: &generator) {
                let (tenant, route, status, code) = labels[index]
                // Fresh strings each time, as a request builds them: equal, not identical.
                worker.recordRequest(tenant: String(tenant.utf8), route: String(route.utf8), status: status,
                                     code: code.map { String($0.utf8) }, seconds: 0.001)
                expected[index] += 1
            }
        }
        let text = registry.render()
        for (index, (tenant, route, status, code)) in labels.enumerated() {
            let series = "attestgate_requests_total{tenant=\"\(tenant)\",route=\"\(route)\",status=\"\(status)\",code=\"\(code ?? "")\"}"
            #expect(text.contains("\(series) \(expected[index])\n"), "\(series)")
        }
        #expect(text.contains("attestgate_request_duration_seconds_count \(expected.reduce(0, +))\n"))
    }

    /// The access log's line from constant fragments against the reference spelling through
    /// `JSONObjectWriter` (the harness's recording log), on
    /// random lines: paths that need escaping and multi-byte ones, no code or upstream time,
    /// negative and huge durations, times around second and epoch boundaries. Only the path
    /// is a client's free choice; every other value is clean by construction and written
    /// unscanned (`valuesWrittenUnscannedAreCleanByConstruction`), so they come from clean
    /// texts here.
    @Test func accessLinesFromFragmentsSpellWhatTheJSONWriterSpells() {
        var generator = SystemRandomNumberGenerator()
        let cleanTexts = ["", "GET", "BENCHTEAM1.com.attestgate.bench", "proxy", "127.0.0.1", "::1",
                          "00000000-0000-4000-8000-000000000000", "upstream_timeout"]
        let paths = cleanTexts + ["/api/v1/x?y=1", "a\"b", "back\\slash", "tab\tnew\nline", "\u{01}\u{1F}", "é✓🚀"]
        func text() -> String { cleanTexts.randomElement(using: &generator)! }
        func path() -> String { paths.randomElement(using: &generator)! }
        let reference = RecordingAccessLog()
        var clock = RFC3339Clock()
        var time: Int64 = 1_796_022_230_000
        for round in 0..<3_000 {
            time += Int64.random(in: -600...1_500, using: &generator)
            let line = AccessLine(
                unixMilliseconds: round % 97 == 0 ? Int64.random(in: -5_000...5_000, using: &generator) : time,
                requestID: RequestIdentifier(text()), method: text(), path: Substring(path()), tenant: text(), route: text(),
                status: [200, 204, 401, 429, 503, 0, -1, Int.min, Int.max].randomElement(using: &generator)!,
                code: Bool.random(using: &generator) ? nil : text(),
                durationMicroseconds: [0, 1, 999, 1_000, 173, 12_345_678, -5, Int.random(in: 0..<10_000_000, using: &generator),
                                       2_000_000_000_000_000_001, -999_999_999_999_999, 1_000_000_000_000_000,
                                       Int.min].randomElement(using: &generator)!,
                upstreamMicroseconds: Bool.random(using: &generator) ? nil : Int.random(in: 0..<5_000_000, using: &generator),
                client: text())
            reference.appendAccess(line)
            var bytes: [UInt8] = []
            AccessLogBuffer.write(line, clock: &clock, to: &bytes)
            #expect(String(decoding: bytes, as: UTF8.self) == reference.lines.last, "\(line)")
        }
    }

    /// A line is written into room reserved for it once (plain stores, no check per piece):
    /// lines whose every value is long — longer than the room's slack for the fixed parts —
    /// spell what the reference spells and stay within their room (writing past it traps).
    @Test func accessLinesWithLongValuesFitTheRoomTheyReserve() {
        let reference = RecordingAccessLog()
        var clock = RFC3339Clock()
        let long = String(repeating: "a", count: 300)
        for path in [String(repeating: "/x", count: 1_500), String(repeating: "\"\u{01}", count: 300)] {
            let line = AccessLine(unixMilliseconds: 1_796_022_230_123, requestID: RequestIdentifier(String(repeating: "r", count: 128)),
                                  method: long, path: Substring(path), tenant: long, route: long, status: Int.min, code: long,
                                  durationMicroseconds: -999_999_999_999_999, upstreamMicroseconds: Int.min,
                                  client: String(repeating: "f", count: 200))
            reference.appendAccess(line)
            var bytes: [UInt8] = []
            AccessLogBuffer.write(line, clock: &clock, to: &bytes)
            #expect(String(decoding: bytes, as: UTF8.self) == reference.lines.last)
        }
    }

    /// The access-log values written without the escaping scan are clean by construction:
    /// request ids (the client's only when `RequestID.isSane`, else a fresh UUID), methods
    /// (token characters, the parser refuses anything else), client addresses (`inet_ntop`
    /// text) and the gateway's own error codes. (Routes are string constants; App IDs pass the
    /// config's team-ID and bundle-ID checks.) Debug builds also assert it on every line.
    @Test func valuesWrittenUnscannedAreCleanByConstruction() throws {
        let source = RequestIDSource()
        for offered in [nil, "", "a\"b", "x\\y", "line\nbreak", "\u{01}", "é", "ok-id_1.2:3", String(repeating: "a", count: 200)] {
            let id = source.resolve(offered)
            #expect(JSONBytes.needsNoEscaping(id.description), "\(String(describing: offered)) -> \(id)")
        }
        let method = "!#$%&'*+-.^_`|~09AZaz"
        let head = try HTTPHeadParser.parseRequest(Array("\(method) / HTTP/1.1\r\nHost: h\r\n\r\n".utf8))
        #expect(head.method == method && JSONBytes.needsNoEscaping(head.method))
        for address in ["127.0.0.1", "::1", "2001:db8::1", "255.255.255.255"] {
            #expect(JSONBytes.needsNoEscaping(try #require(IPAddress(address)).description))
        }
        for error in [GatewayError.upstreamTimeout, .upstreamUnavailable, .routeNotFound, .deviceRevoked, .payloadTooLarge(limit: 1)] {
            #expect(JSONBytes.needsNoEscaping(error.code))
        }
    }
}
