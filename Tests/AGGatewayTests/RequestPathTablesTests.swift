import AGConfig
import AGHTTP
import AGTestSupport
import Testing

@testable import AGGateway

/// Tables and generators the request path uses instead of building strings: the tenant index
/// over header bytes, and request ids.
@Suite struct RequestPathTablesTests {
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
                let (teamRange, bundleRange) = try #require(TenantIndex.tenantFields(fields))
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

    @Test func tenantFieldsAreTheFirstOfEachName() throws {
        let fields = try HTTPFields(parsing: Array("x-team-id: T1\r\nX-Bundle-ID: b1\r\nX-Team-ID: T2\r\n\r\n".utf8))
        let (team, bundle) = try #require(TenantIndex.tenantFields(fields))
        #expect(String(decoding: fields.storage[team], as: UTF8.self) == "T1")
        #expect(String(decoding: fields.storage[bundle], as: UTF8.self) == "b1")
        #expect(TenantIndex.tenantFields(try HTTPFields(parsing: Array("X-Team-ID: T1\r\n\r\n".utf8))) == nil)
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
    }
}
