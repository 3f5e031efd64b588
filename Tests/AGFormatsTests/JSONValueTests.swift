import AGFormats
import Testing

private let parseCases: [(String, JSONValue)] = [
    ("null", .null), ("true", true), ("false", false),
    ("0", .integer(0)), ("-0", .integer(0)), ("42", .integer(42)), ("-9223372036854775808", .integer(Int64.min)),
    ("9223372036854775808", .double(9_223_372_036_854_775_808)),
    ("1.5", .double(1.5)), ("-2e3", .double(-2000)), ("1E-2", .double(0.01)),
    ("\"\"", ""), ("\"a\\\"b\\\\c\\/d\"", "a\"b\\c/d"),
    ("\"\\b\\f\\n\\r\\t\"", "\u{8}\u{c}\n\r\t"),
    ("\"\\u00e9\\u20AC\"", "é€"), ("\"\\ud83d\\ude00\"", "😀"), ("\"é😀\"", "é😀"),
    (" [ 1 , [ ] , { } ] ", [1, [], [:]]),
    ("{\"a\":{\"b\":[true,null]}}", ["a": ["b": [true, nil]]]),
]

private let invalidJSON: [(String, String)] = [
    ("empty", ""), ("whitespace only", "  "), ("bare word", "nul"), ("capitalised literal", "True"),
    ("leading zero", "01"), ("plus sign", "+1"), ("lone minus", "-"), ("trailing dot", "1."),
    ("leading dot", ".5"), ("empty exponent", "1e"), ("infinity", "1e400"), ("NaN", "NaN"),
    ("trailing comma in array", "[1,]"), ("trailing comma in object", "{\"a\":1,}"),
    ("missing colon", "{\"a\" 1}"), ("unquoted key", "{a:1}"), ("single quotes", "'a'"),
    ("duplicate key", "{\"a\":1,\"a\":2}"), ("unterminated string", "\"abc"),
    ("raw control character", "\"a\u{1}b\""), ("raw newline", "\"a\nb\""), ("bad escape", "\"\\x\""),
    ("short unicode escape", "\"\\u12\""), ("lone high surrogate", "\"\\ud83d\""),
    ("lone low surrogate", "\"\\ude00\""), ("high surrogate then letter", "\"\\ud83dx\""),
    ("two values", "1 2"), ("comment", "1 // c"), ("unclosed array", "[1"), ("unclosed object", "{"),
]

@Suite("JSONValue parsing and serialization")
struct JSONValueTests {
    @Test("valid JSON parses", arguments: parseCases)
    func parses(text: String, expected: JSONValue) throws {
        #expect(try JSONValue(parsing: text) == expected)
    }

    @Test("invalid JSON is rejected", arguments: invalidJSON)
    func rejects(name: String, text: String) {
        #expect(throws: JSONParseError.self, "\(name)") { try JSONValue(parsing: text) }
    }

    @Test("invalid UTF-8 is rejected")
    func invalidUTF8() {
        #expect(throws: JSONParseError.self) { try JSONValue(parsing: [0x22, 0xC3, 0x28, 0x22]) }
        #expect(throws: JSONParseError.self) { try JSONValue(parsing: [0x22, 0x5C, 0x6E, 0xFF, 0x22]) }
    }

    @Test("nesting is limited")
    func depth() throws {
        let deep = String(repeating: "[", count: 65) + String(repeating: "]", count: 65)
        #expect(throws: JSONParseError.self) { try JSONValue(parsing: deep) }
        _ = try JSONValue(parsing: String(repeating: "[", count: 64) + String(repeating: "]", count: 64))
        #expect(throws: JSONParseError.self) { try JSONValue(parsing: String(repeating: "[", count: 100_000)) }
    }

    @Test("compact serialization with sorted keys and minimal escaping", arguments: [
        (JSONValue.object(["b": 1, "a": [true, nil, "x"]]), #"{"a":[true,null,"x"],"b":1}"#),
        (.string("q\"\\/\n\u{1}é"), #""q\"\\/\n\u0001é""#),
        (.double(1.5), "1.5"), (.double(3), "3"), (.double(.infinity), "null"), (.integer(-7), "-7"),
        (.object([:]), "{}"), (.array([]), "[]"),
    ])
    func serializes(value: JSONValue, expected: String) {
        #expect(value.serializedString() == expected)
    }

    @Test("serialize then parse gives the value back")
    func roundTrip() throws {
        let claims: JSONValue = [
            "iss": "https://gw.example", "iat": 1_700_000_000, "custom_claims": ["plan": "pro", "seats": 3, "ratio": 0.25],
            "emoji": "😀\u{7f}\t", "list": [1, "two", false, nil],
        ]
        #expect(try JSONValue(parsing: claims.serialized()) == claims)
    }

    @Test("accessors")
    func accessors() throws {
        let value = try JSONValue(parsing: #"{"s":"x","i":3,"d":3.0,"f":2.5,"b":true,"a":[1],"o":{}}"#)
        #expect(value["s"]?.stringValue == "x")
        #expect(value["i"]?.integerValue == 3)
        #expect(value["d"]?.integerValue == 3)
        #expect(value["f"]?.integerValue == nil)
        #expect(value["f"]?.doubleValue == 2.5)
        #expect(value["b"]?.boolValue == true)
        #expect(value["a"]?.arrayValue == [1])
        #expect(value["o"]?.objectValue == [:])
        #expect(value["missing"] == nil)
        #expect(value["s"]?.integerValue == nil)
    }
}
