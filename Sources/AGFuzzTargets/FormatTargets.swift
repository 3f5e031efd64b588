import AGFormats

/// Base64, JSON and CBOR: the decoders every request body goes through.
enum FormatTargets {
    /// Whatever decodes must re-encode to something that decodes to the same bytes, in both
    /// alphabets; the canonical spelling must decode to what the input did.
    static let base64 = FuzzTarget(
        name: "base64", summary: "Base64.decode / decodeURL (standard and url-safe alphabets, padding)",
        seeds: { ["", "Zg==", "Zm9vYmFy", "-_-_", "AAAA\n", "YWJj ZA==", "////", "Zg", "Zm9v=", "a+/b-_"].map(\.bytes) }
    ) { input in
        if let decoded = Base64.decode(utf8: input) {
            guard Base64.decode(Base64.encode(decoded)) == decoded else { return "standard base64 does not round-trip" }
        }
        if let decoded = Base64.decodeURL(utf8: input) {
            guard Base64.decodeURL(Base64.encodeURL(decoded)) == decoded else { return "base64url does not round-trip" }
        }
        return nil
    }

    /// A parsed document serializes to JSON that parses to the same value, and serializing is
    /// a fixed point after one step.
    static let json = FuzzTarget(
        name: "json", summary: "JSONValue(parsing:) with its depth limit; serialization round trip",
        seeds: {
            [#"{"keyId":"abc","assertion":"AAAA","n":[1,2.5,-3e10,true,false,null],"o":{"a":{}}}"#,
             #"["\u00e9\ud83d\ude00\n\t\"\\\/"]"#, "0", "-0.0", "1e400", "123456789012345678901234567890",
             String(repeating: "[", count: 70) + String(repeating: "]", count: 70), #"{"a":1,"a":2}"#, " \n{} "].map(\.bytes)
        }
    ) { input in
        guard let value = try? JSONValue(parsing: input) else { return nil }
        let serialized = value.serialized()
        guard let again = try? JSONValue(parsing: serialized) else { return "serialized JSON does not parse: \(String(decoding: serialized, as: UTF8.self))" }
        guard sameJSON(again, value) else { return "JSON value changed in a round trip" }
        guard again.serialized() == serialized else { return "JSON serialization is not a fixed point" }
        return nil
    }

    /// Equal as JSON: numbers by value (`1E2` parses as a double, serializes as `100` and
    /// parses back as an integer; `-0.0` is `0`).
    static func sameJSON(_ a: JSONValue, _ b: JSONValue) -> Bool {
        switch (a, b) {
        case (.integer(let x), .double(let y)), (.double(let y), .integer(let x)): Double(x) == y
        case (.array(let x), .array(let y)): x.count == y.count && zip(x, y).allSatisfy { sameJSON($0, $1) }
        case (.object(let x), .object(let y)):
            x.count == y.count && x.allSatisfy { key, value in y[key].map { sameJSON(value, $0) } ?? false }
        default: a == b
        }
    }

    /// Never crashes or recurses past its depth limit, in both strictness modes.
    static let cbor = FuzzTarget(
        name: "cbor", summary: "CBORDecoder (assertions and attestation objects), lenient and shortest-form",
        seeds: { CBORSeeds.all }
    ) { input in
        let lenient = try? CBORDecoder(maximumDepth: 16).decode(input)
        let strict = try? CBORDecoder(maximumDepth: 16, requireShortestArguments: true).decode(input)
        if strict != nil && lenient == nil { return "the strict decoder accepted what the lenient one refused" }
        if let strict, let lenient, strict != lenient { return "the two decoders disagree on one input" }
        _ = try? CBORDecoder(maximumDepth: 2).decode(input)
        return nil
    }
}
