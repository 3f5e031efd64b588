import AGFormats
import Testing

/// Examples from RFC 8949 Appendix A within the supported subset.
private let validItems: [(String, CBORValue)] = [
    ("00", .unsigned(0)),
    ("17", .unsigned(23)),
    ("1818", .unsigned(24)),
    ("1903e8", .unsigned(1000)),
    ("1bffffffffffffffff", .unsigned(UInt64.max)),
    ("20", .negative(0)),
    ("3863", .negative(99)),
    ("40", .bytes([])),
    ("4401020304", .bytes([1, 2, 3, 4])),
    ("60", .text("")),
    ("6449455446", .text("IETF")),
    ("62c3bc", .text("\u{fc}")),
    ("80", .array([])),
    ("83010203", .array([.unsigned(1), .unsigned(2), .unsigned(3)])),
    ("8301820203820405", .array([.unsigned(1), .array([.unsigned(2), .unsigned(3)]), .array([.unsigned(4), .unsigned(5)])])),
    ("a0", .map([])),
    ("a201020304", .map([(.unsigned(1), .unsigned(2)), (.unsigned(3), .unsigned(4))])),
    ("a26161016162820203", .map([(.text("a"), .unsigned(1)), (.text("b"), .array([.unsigned(2), .unsigned(3)]))])),
    ("f4", .bool(false)), ("f5", .bool(true)), ("f6", .null), ("f7", .undefined),
]

private let invalidItems: [(String, String, CBORError)] = [
    ("empty input", "", .truncated),
    ("truncated argument", "19 03", .truncated),
    ("truncated byte string", "44 0102", .lengthExceedsInput),
    ("array count larger than input", "83 0102", .lengthExceedsInput),
    ("truncated inside an array", "82 19 01", .truncated),
    ("map missing a value", "a1 01", .lengthExceedsInput),
    ("map value truncated", "a1 01 19", .truncated),
    ("trailing byte", "00 00", .trailingBytes),
    ("indefinite byte string", "5f 41 01 ff", .unsupported(majorType: 2, additionalInfo: 31)),
    ("indefinite array", "9f 01 ff", .unsupported(majorType: 4, additionalInfo: 31)),
    ("indefinite map", "bf 01 02 ff", .unsupported(majorType: 5, additionalInfo: 31)),
    ("reserved additional info", "1c", .unsupported(majorType: 0, additionalInfo: 28)),
    ("tag", "c1 1a 514b67b0", .unsupported(majorType: 6, additionalInfo: 1)),
    ("half float", "f9 3c00", .unsupported(majorType: 7, additionalInfo: 25)),
    ("double", "fb 3ff199999999999a", .unsupported(majorType: 7, additionalInfo: 27)),
    ("simple value 16", "f0", .unsupported(majorType: 7, additionalInfo: 16)),
    ("break outside indefinite item", "ff", .unsupported(majorType: 7, additionalInfo: 31)),
    ("huge byte string length", "5b ffffffffffffffff", .lengthExceedsInput),
    ("huge array count", "9b 7fffffffffffffff 00", .lengthExceedsInput),
    ("map count larger than input", "a3 0102", .lengthExceedsInput),
    ("invalid UTF-8", "62 c328", .invalidUTF8),
    ("duplicate map key", "a2 6161 01 6161 02", .duplicateMapKey),
]

@Suite("CBOR decoder")
struct CBORDecoderTests {
    @Test("RFC 8949 examples decode", arguments: validItems)
    func decodes(encoded: String, expected: CBORValue) throws {
        #expect(try CBORDecoder().decode(hex(encoded)) == expected)
    }

    @Test("malformed and unsupported input is rejected with the right error", arguments: invalidItems)
    func rejects(name: String, encoded: String, expected: CBORError) {
        #expect(throws: expected, "\(name)") { try CBORDecoder().decode(hex(encoded)) }
    }

    @Test("nesting is limited")
    func depth() throws {
        let nested = [UInt8](repeating: 0x81, count: 16) + [0x00]
        #expect(throws: CBORError.tooDeep) { try CBORDecoder(maximumDepth: 15).decode(nested) }
        _ = try CBORDecoder(maximumDepth: 16).decode(nested)
        let deepMaps = [UInt8](repeating: 0xA1, count: 10_000) + [0x00, 0x00]
        #expect(throws: CBORError.self) { try CBORDecoder().decode(deepMaps) }
    }

    @Test("shortest-form arguments are enforced on request", arguments: ["1817", "190001", "1a000000ff", "1b00000000ffffffff"])
    func canonical(encoded: String) throws {
        _ = try CBORDecoder().decode(hex(encoded))
        #expect(throws: CBORError.nonCanonicalArgument) {
            try CBORDecoder(requireShortestArguments: true).decode(hex(encoded))
        }
    }

    @Test("accessors")
    func accessors() throws {
        let value = try CBORDecoder().decode(hex("a3 63666d74 6161 6361747441 01 6361727283 00 20 3bffffffffffffffff"))
        #expect(value["fmt"]?.textValue == "a")
        #expect(value["att"]?.bytesValue == [1])
        #expect(value["arr"]?.arrayValue?.map(\.integerValue) == [0, -1, nil])
        #expect(value["missing"] == nil)
        #expect(CBORValue.text("x")["fmt"] == nil)
        #expect(CBORValue.unsigned(UInt64.max).integerValue == nil)
    }

    @Test("thousands of mutations of real attestation and assertion objects never crash")
    func mutations() throws {
        let vectors = try Fixtures.vectors()
        let objects = vectors.compactMap { Base64.decode($0) }
        #expect(objects.count >= 17)
        var generator = SplitMix64(seed: 0x5EED)
        let decoder = CBORDecoder()
        var accepted = 0
        for object in objects {
            #expect(throws: Never.self) { try decoder.decode(object) }
            for _ in 0..<400 {
                var mutated = object
                switch generator.next() % 4 {
                case 0:
                    mutated.removeSubrange(Int(generator.next() % UInt64(mutated.count))...)
                case 1:
                    for _ in 0..<(1 + generator.next() % 4) {
                        let index = Int(generator.next() % UInt64(mutated.count))
                        mutated[index] ^= UInt8(truncatingIfNeeded: 1 << (generator.next() % 8))
                    }
                case 2:
                    let index = Int(generator.next() % UInt64(mutated.count))
                    mutated[index] = UInt8(truncatingIfNeeded: generator.next())
                default:
                    let index = Int(generator.next() % UInt64(mutated.count))
                    mutated.insert(contentsOf: (0..<(generator.next() % 9)).map { _ in UInt8(truncatingIfNeeded: generator.next()) }, at: index)
                }
                if (try? decoder.decode(mutated)) != nil { accepted += 1 }
            }
        }
        for length in 0..<64 {
            for _ in 0..<50 {
                let random = (0..<length).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
                if (try? decoder.decode(random)) != nil { accepted += 1 }
            }
        }
        // Some mutations (flips inside byte strings) stay well-formed; reaching here without a
        // crash is the property under test.
        #expect(accepted >= 0)
    }
}

/// Maps as large as a request body allows: duplicate keys are found by hashing, in linear time
/// (a linear scan per key was quadratic: 4,000 entries took 11 s in a debug build, 16,000 two
/// minutes; found by the cbor fuzz target). No timed assertion: the suite's time limit is what
/// the quadratic scan exceeded.
@Suite(.timeLimit(.minutes(1))) struct CBORLargeMapTests {
    /// A map of `count` entries `{uint16(i): 0}`.
    static func map(_ count: Int, duplicateAt duplicate: Int? = nil) -> [UInt8] {
        var bytes: [UInt8] = [0xB9, UInt8(count >> 8), UInt8(count & 0xFF)]
        for index in 0..<count {
            let key = index == duplicate ? 0 : index
            bytes += [0x19, UInt8(key >> 8), UInt8(key & 0xFF), 0x00]
        }
        return bytes
    }

    @Test func aMapOfSixteenThousandEntriesDecodesInLinearTime() throws {
        let value = try CBORDecoder().decode(Self.map(16_000))
        if case .map(let entries) = value { #expect(entries.count == 16_000) } else { Issue.record("not a map") }
    }

    @Test func duplicatesAreStillFoundAnywhereAndInAnySpelling() {
        #expect(throws: CBORError.duplicateMapKey) { try CBORDecoder().decode(Self.map(16_000, duplicateAt: 15_999)) }
        // 1 and 1 written in two widths, [1] and [1], {1: 2} and {1: 2}: equal keys.
        for hex in ["a2 01 00 18 01 00", "a2 81 01 00 81 01 00", "a2 a1 01 02 00 a1 01 02 00"] {
            #expect(throws: CBORError.duplicateMapKey, "\(hex)") { try CBORDecoder().decode(AGFormatsTests.hex(hex)) }
        }
        #expect((try? CBORDecoder().decode(AGFormatsTests.hex("a2 81 01 00 81 02 00"))) != nil, "[1] and [2] differ")
    }

    @Test func hashingAgreesWithEquality() {
        let values: [CBORValue] = [.unsigned(1), .negative(1), .bytes([1]), .text("1"), .array([.unsigned(1)]),
                                   .map([(.unsigned(1), .unsigned(1))]), .bool(true), .null, .undefined]
        #expect(Set(values).count == values.count)
        #expect(Set(values + values).count == values.count)
    }
}

/// A small deterministic generator so fuzz runs are reproducible.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
