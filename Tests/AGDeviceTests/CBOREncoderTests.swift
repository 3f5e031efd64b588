import AGFormats
import Testing

private func hex(_ text: String) -> [UInt8] {
    var bytes = [UInt8]()
    var index = text.startIndex
    while index < text.endIndex {
        let next = text.index(index, offsetBy: 2)
        bytes.append(UInt8(text[index..<next], radix: 16)!)
        index = next
    }
    return bytes
}

/// RFC 8949 Appendix A examples that `CBORValue` can represent.
private let rfc8949Examples: [(CBORValue, String)] = [
    (.unsigned(0), "00"),
    (.unsigned(1), "01"),
    (.unsigned(10), "0a"),
    (.unsigned(23), "17"),
    (.unsigned(24), "1818"),
    (.unsigned(25), "1819"),
    (.unsigned(100), "1864"),
    (.unsigned(1000), "1903e8"),
    (.unsigned(1_000_000), "1a000f4240"),
    (.unsigned(1_000_000_000_000), "1b000000e8d4a51000"),
    (.unsigned(18_446_744_073_709_551_615), "1bffffffffffffffff"),
    (.negative(18_446_744_073_709_551_615), "3bffffffffffffffff"),
    (.negative(0), "20"),
    (.negative(9), "29"),
    (.negative(99), "3863"),
    (.negative(999), "3903e7"),
    (.bool(false), "f4"),
    (.bool(true), "f5"),
    (.null, "f6"),
    (.undefined, "f7"),
    (.bytes([]), "40"),
    (.bytes([1, 2, 3, 4]), "4401020304"),
    (.text(""), "60"),
    (.text("a"), "6161"),
    (.text("IETF"), "6449455446"),
    (.text("\"\\"), "62225c"),
    (.text("\u{00fc}"), "62c3bc"),
    (.text("\u{6c34}"), "63e6b0b4"),
    (.text("\u{10151}"), "64f0908591"),
    (.array([]), "80"),
    (.array([.unsigned(1), .unsigned(2), .unsigned(3)]), "83010203"),
    (.array([.unsigned(1), .array([.unsigned(2), .unsigned(3)]), .array([.unsigned(4), .unsigned(5)])]),
     "8301820203820405"),
    (.array((1...25).map { .unsigned($0) }),
     "98190102030405060708090a0b0c0d0e0f101112131415161718181819"),
    (.map([]), "a0"),
    (.map([(.unsigned(1), .unsigned(2)), (.unsigned(3), .unsigned(4))]), "a201020304"),
    (.map([(.text("a"), .unsigned(1)), (.text("b"), .array([.unsigned(2), .unsigned(3)]))]), "a26161016162820203"),
    (.array([.text("a"), .map([(.text("b"), .text("c"))])]), "826161a161626163"),
    (.map([(.text("a"), .text("A")), (.text("b"), .text("B")), (.text("c"), .text("C")),
           (.text("d"), .text("D")), (.text("e"), .text("E"))]),
     "a56161614161626142616361436164614461656145"),
]

@Test("encodes the RFC 8949 Appendix A examples byte for byte", arguments: 0..<rfc8949Examples.count)
func rfc8949Example(index: Int) {
    let (value, expected) = rfc8949Examples[index]
    #expect(CBOREncoder().encode(value) == hex(expected))
}

@Test("every argument width boundary is written in its shortest form and decodes strictly")
func argumentBoundaries() throws {
    let boundaries: [(UInt64, Int)] = [
        (23, 1), (24, 2), (255, 2), (256, 3), (65_535, 3), (65_536, 5),
        (4_294_967_295, 5), (4_294_967_296, 9), (UInt64.max, 9),
    ]
    let strict = CBORDecoder(requireShortestArguments: true)
    for (number, size) in boundaries {
        for value in [CBORValue.unsigned(number), .negative(number)] {
            let encoded = CBOREncoder().encode(value)
            #expect(encoded.count == size, "\(value)")
            #expect(try strict.decode(encoded) == value)
        }
    }
    // Lengths use the same argument encoding.
    for count in [0, 23, 24, 255, 256, 70_000] {
        let value = CBORValue.bytes([UInt8](repeating: 0xAB, count: count))
        #expect(try strict.decode(CBOREncoder().encode(value)) == value)
    }
}

@Test("nested values round-trip through the strict decoder with map order preserved")
func roundTrip() throws {
    let value = CBORValue.map([
        (.text("signature"), .bytes([0x30, 0x45, 0x02, 0x21])),
        (.text("authenticatorData"), .bytes([UInt8](repeating: 7, count: 37))),
        (.unsigned(3), .array([.negative(0), .bool(true), .null, .undefined, .text("ü水𐅑")])),
        (.negative(1), .map([(.text("inner"), .array([]))])),
    ])
    let encoded = CBOREncoder().encode(value)
    let decoded = try CBORDecoder(requireShortestArguments: true).decode(encoded)
    #expect(decoded == value)
    // The order matters for imitating devices: signature first.
    #expect(Array(encoded.prefix(11)) == [0xA4, 0x69] + Array("signature".utf8))
}

@Test("deterministic mode sorts map keys by their encoded bytes (RFC 8949 §4.2.1)")
func deterministicKeyOrder() {
    let value = CBORValue.map([
        (.text("signature"), .unsigned(1)),
        (.text("authenticatorData"), .unsigned(2)),
        (.negative(0), .unsigned(3)),
        (.unsigned(10), .unsigned(4)),
        (.unsigned(100), .unsigned(5)),
        (.text("z"), .unsigned(6)),
    ])
    let sorted = CBOREncoder(sortingMapKeys: true).encode(value)
    // 0x0a < 0x18 0x64 < 0x20 < 0x61 "z" < 0x69 "signature" < 0x71 "authenticatorData"
    let expected = CBOREncoder().encode(.map([
        (.unsigned(10), .unsigned(4)),
        (.unsigned(100), .unsigned(5)),
        (.negative(0), .unsigned(3)),
        (.text("z"), .unsigned(6)),
        (.text("signature"), .unsigned(1)),
        (.text("authenticatorData"), .unsigned(2)),
    ]))
    #expect(sorted == expected)
}
