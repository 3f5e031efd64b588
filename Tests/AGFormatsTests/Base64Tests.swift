import AGFormats
import Testing

private let rfc4648Vectors: [(String, String)] = [
    ("", ""), ("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v"),
    ("foob", "Zm9vYg=="), ("fooba", "Zm9vYmE="), ("foobar", "Zm9vYmFy"),
]

private let invalidStandard: [(String, String)] = [
    ("one leftover character", "Zm9vY"),
    ("space", "Zm9v Zg=="),
    ("newline", "Zm9v\nZg=="),
    ("url alphabet", "-_-_"),
    ("padding in the middle", "Zg==Zg=="),
    ("three padding characters", "Z==="),
    ("only padding", "===="),
    ("incomplete padding", "Zg="),
    ("non-zero unused bits, one byte", "Zh=="),
    ("non-zero unused bits, two bytes", "Zm9="),
    ("non-ASCII", "Zm9v\u{e9}"),
    ("NUL", "Zm9v\u{0}"),
]

private let invalidURL: [(String, String)] = [
    ("padding", "Zg=="),
    ("standard plus", "++++"),
    ("standard slash", "////"),
    ("one leftover character", "Zm9vY"),
    ("non-zero unused bits", "Zh"),
    ("dot", "Zm9v.Zg"),
]

@Suite("Base64 and base64url")
struct Base64Tests {
    @Test("RFC 4648 test vectors", arguments: rfc4648Vectors)
    func vectors(plain: String, encoded: String) {
        let bytes = Array(plain.utf8)
        #expect(Base64.encode(bytes) == encoded)
        #expect(Base64.decode(encoded) == bytes)
        let unpadded = String(encoded.prefix { $0 != "=" })
        #expect(Base64.decode(unpadded) == bytes)
        #expect(Base64.encodeURL(bytes) == unpadded)
        #expect(Base64.decodeURL(unpadded) == bytes)
        #expect(Base64.decode(utf8: Array(encoded.utf8)) == bytes)
    }

    @Test("the two alphabets differ only in the last two characters")
    func alphabets() {
        let bytes: [UInt8] = [0xFB, 0xFF, 0xBF]
        #expect(Base64.encode(bytes) == "+/+/")
        #expect(Base64.encodeURL(bytes) == "-_-_")
        #expect(Base64.decode("+/+/") == bytes)
        #expect(Base64.decodeURL("-_-_") == bytes)
    }

    @Test("invalid standard base64 is rejected", arguments: invalidStandard)
    func rejectsStandard(name: String, text: String) {
        #expect(Base64.decode(text) == nil, "\(name)")
    }

    @Test("invalid base64url is rejected", arguments: invalidURL)
    func rejectsURL(name: String, text: String) {
        #expect(Base64.decodeURL(text) == nil, "\(name)")
    }

    @Test("either alphabet, padded or not; never both at once")
    func eitherAlphabet() {
        let bytes: [UInt8] = [0xFB, 0xFF, 0xBF, 0x01]  // "+/+/AQ==" and "-_-_AQ=="
        for text in ["+/+/AQ==", "+/+/AQ", "-_-_AQ==", "-_-_AQ"] {
            #expect(Base64.decodeEitherAlphabet(text) == bytes, "\(text)")
        }
        for text in ["+_+_AQ==", "-/-/AQ", "-_-_AQ=", "-_-_AQ===", "-_-_A Q==", "-_-_AR=="] {
            #expect(Base64.decodeEitherAlphabet(text) == nil, "\(text)")
        }
    }

    @Test("every length and byte value round-trips through both alphabets")
    func roundTrip() {
        var generator = SystemRandomNumberGenerator()
        for length in 0..<200 {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            #expect(Base64.decode(Base64.encode(bytes)) == bytes)
            #expect(Base64.decodeURL(Base64.encodeURL(bytes)) == bytes)
            #expect(Base64.decodeURL(Base64.encode(bytes).prefix { $0 != "=" }) == nil
                    || !Base64.encode(bytes).contains(where: { $0 == "+" || $0 == "/" }))
        }
        let all = (0...255).map { UInt8($0) }
        #expect(Base64.decode(Base64.encode(all)) == all)
    }

    @Test("substrings decode without copying into a new string")
    func substring() {
        let text = "xxZm9vYmFyxx"
        let inner = text.dropFirst(2).dropLast(2)
        #expect(Base64.decode(inner) == Array("foobar".utf8))
    }
}
