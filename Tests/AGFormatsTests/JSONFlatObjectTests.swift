import AGFormats
import Testing

/// The attestation bodies' fast path may only ever accept what the strict parser accepts, with
/// the same members; anything else it leaves to the strict parser (nil).
@Suite struct JSONFlatObjectTests {
    static let body = #"{"keyId":"q+/ZAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=","assertion":"omlzaWduYXR1cmVYRzBFAiEA","clientDataHash":"n4bQgYhMfWWaL+qgxVrQFaO/TxsrC4Is0V1sFbDwCgg=","challenge":"0123456789abcdef"}"#

    private func strictMembers(_ bytes: [UInt8]) -> [String: JSONValue]? {
        guard let value = try? JSONValue(parsing: bytes), case .object(let members) = value else { return nil }
        return members
    }

    private func agrees(_ bytes: [UInt8]) -> Bool {
        guard let flat = JSONFlatObject.scan(bytes) else { return true }
        guard let strict = strictMembers(bytes), strict.count == flat.count else { return false }
        return flat.allSatisfy { strict[$0.name] == .string($0.value) }
    }

    @Test func usualBodyTakesTheFastPath() throws {
        let flat = try #require(JSONFlatObject.scan(Array(Self.body.utf8)))
        #expect(flat.map(\.name) == ["keyId", "assertion", "clientDataHash", "challenge"])
        #expect(flat[3].value == "0123456789abcdef")
        #expect(agrees(Array(Self.body.utf8)))
        let spaced = Array(" \n{ \"a\" : \"1\" ,\t\"b\":\"\" }\r\n".utf8)
        #expect(JSONFlatObject.scan(spaced)?.map(\.value) == ["1", ""])
        #expect(JSONFlatObject.scan(Array("{}".utf8))?.isEmpty == true)
    }

    @Test(arguments: [
        #"{"a":"1","a":"2"}"#,          // duplicate: the strict parser refuses it
        #"{"a":"x\"y"}"#,              // escape
        #"{"a":"\u0041"}"#,
        #"{"a":1}"#, #"{"a":null}"#, #"{"a":true}"#, #"{"a":{}}"#, #"{"a":[]}"#,
        #"{"a":"1",}"#, #"{"a":"1"} x"#, #"{"a" "1"}"#, #"{"a":"1""#, #"{a:"1"}"#,
        "[\"a\"]", "\"a\"", "", "{", "{\"a\":\"\u{1}\"}", "{\"a\":\"é\"}", "{\"a\":\"\u{7F}\"}",
    ])
    func leavesEverythingElseToTheStrictParser(text: String) {
        #expect(JSONFlatObject.scan(Array(text.utf8)) == nil)
    }

    /// Random edits of real bodies (deterministic seed), concentrated on the characters that
    /// matter to JSON: whatever the fast path accepts must be the strict parser's answer.
    @Test func mutatedBodiesAgreeWithTheStrictParser() {
        var random = SplitMix64(seed: 0x5EED_11)
        let alphabet = Array(#"{}[]":,\ "aA0-é"#.utf8) + [0x00, 0x09, 0x0A, 0x7F, 0xC3, 0xFF]
        let seeds = [Self.body, #"{"keyId":"k","challenge":"c","subjectId":"0b6e7f47-7e0c-4f0a-9c7e-2f6d6a1d3c55"}"#, #"{"a":"b"}"#]
        var accepted = 0
        var disagreements: [String] = []
        for _ in 0..<4_000 {
            var bytes = Array(seeds[Int(random.next() % UInt64(seeds.count))].utf8)
            for _ in 0..<(1 + Int(random.next() % 3)) {
                let position = Int(random.next() % UInt64(bytes.count + 1))
                let byte = alphabet[Int(random.next() % UInt64(alphabet.count))]
                switch random.next() % 3 {
                case 0 where position < bytes.count: bytes[position] = byte
                case 1 where position < bytes.count: bytes.remove(at: position)
                default: bytes.insert(byte, at: position)
                }
            }
            if JSONFlatObject.scan(bytes) != nil { accepted += 1 }
            if !agrees(bytes) { disagreements.append(String(decoding: bytes, as: UTF8.self)) }
        }
        #expect(disagreements.isEmpty, "\(disagreements.prefix(5))")
        // Not vacuous: a good share of the edits still has the simple shape.
        #expect(accepted > 200)
    }
}
