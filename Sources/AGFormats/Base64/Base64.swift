/// Base64 (RFC 4648 §4) and base64url (§5), strict.
///
/// Decoding rejects characters outside the alphabet (including whitespace and line breaks),
/// impossible lengths, misplaced padding and non-zero unused bits, so every byte string has
/// exactly one accepted encoding per alphabet (apart from optional padding in standard base64).
public enum Base64 {
    private static let standardAlphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
    private static let urlAlphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
    private static let invalid: UInt8 = 0xFF
    private static let standardTable = decodingTable(standardAlphabet)
    private static let urlTable = decodingTable(urlAlphabet)

    private static func decodingTable(_ alphabet: [UInt8]) -> [UInt8] {
        var table = [UInt8](repeating: invalid, count: 256)
        for (value, character) in alphabet.enumerated() {
            table[Int(character)] = UInt8(value)
        }
        return table
    }

    // MARK: Encoding

    /// Standard base64 with `=` padding.
    public static func encode<D: Collection>(_ data: D) -> String where D.Element == UInt8 {
        encode(data, alphabet: standardAlphabet, pad: true)
    }

    /// base64url without padding (JOSE, RFC 7515 §2).
    public static func encodeURL<D: Collection>(_ data: D) -> String where D.Element == UInt8 {
        encode(data, alphabet: urlAlphabet, pad: false)
    }

    private static func encode<D: Collection>(_ data: D, alphabet: [UInt8], pad: Bool) -> String where D.Element == UInt8 {
        let bytes = data as? [UInt8] ?? Array(data)
        let fullGroups = bytes.count / 3
        let remainder = bytes.count % 3
        let length = fullGroups * 4 + (remainder == 0 ? 0 : (pad ? 4 : remainder + 1))
        let input = bytes.span
        let table = alphabet.span
        return String(unsafeUninitializedCapacity: length) { output in
            var out = 0
            var index = 0
            for _ in 0..<fullGroups {
                let word = UInt32(input[index]) << 16 | UInt32(input[index + 1]) << 8 | UInt32(input[index + 2])
                output[out] = table[Int(word >> 18)]
                output[out + 1] = table[Int(word >> 12 & 0x3F)]
                output[out + 2] = table[Int(word >> 6 & 0x3F)]
                output[out + 3] = table[Int(word & 0x3F)]
                out += 4
                index += 3
            }
            if remainder > 0 {
                let second = remainder == 2 ? UInt32(input[index + 1]) : 0
                let word = UInt32(input[index]) << 16 | second << 8
                output[out] = table[Int(word >> 18)]
                output[out + 1] = table[Int(word >> 12 & 0x3F)]
                out += 2
                if remainder == 2 {
                    output[out] = table[Int(word >> 6 & 0x3F)]
                    out += 1
                } else if pad {
                    output[out] = UInt8(ascii: "=")
                    out += 1
                }
                if pad {
                    output[out] = UInt8(ascii: "=")
                    out += 1
                }
            }
            return out
        }
    }

    // MARK: Decoding

    /// Decodes standard base64; `=` padding may be present (then it must be complete and correct)
    /// or absent. Returns nil for anything else.
    public static func decode<S: StringProtocol>(_ text: S) -> [UInt8]? {
        decode(utf8: text.utf8, table: standardTable, allowPadding: true)
    }

    /// Decodes base64url without padding, as JOSE requires. Returns nil for anything else,
    /// including padded input and the standard alphabet's `+` and `/`.
    public static func decodeURL<S: StringProtocol>(_ text: S) -> [UInt8]? {
        decode(utf8: text.utf8, table: urlTable, allowPadding: false)
    }

    /// Base64 in either alphabet (RFC 4648 sections 4 and 5), `=` padding optional (complete and
    /// correct when present), otherwise strict: what Macs, IdPs and admin tools variously send
    /// for key ids and raw keys. A mix of both alphabets is refused (nobody produces one).
    public static func decodeEitherAlphabet<S: StringProtocol>(_ text: S) -> [UInt8]? {
        var urlSafe = false, standard = false
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "-"), UInt8(ascii: "_"): urlSafe = true
            case UInt8(ascii: "+"), UInt8(ascii: "/"): standard = true
            default: break
            }
        }
        if urlSafe && standard { return nil }
        return decode(utf8: text.utf8, table: urlSafe ? urlTable : standardTable, allowPadding: true)
    }

    /// Standard base64 given as UTF-8 bytes (for example straight from a request body).
    public static func decode<D: Sequence>(utf8: D) -> [UInt8]? where D.Element == UInt8 {
        decode(utf8: utf8, table: standardTable, allowPadding: true)
    }

    /// base64url given as UTF-8 bytes.
    public static func decodeURL<D: Sequence>(utf8: D) -> [UInt8]? where D.Element == UInt8 {
        decode(utf8: utf8, table: urlTable, allowPadding: false)
    }

    private static func decode<D: Sequence>(utf8: D, table: [UInt8], allowPadding: Bool) -> [UInt8]? where D.Element == UInt8 {
        // A native string's (or an array's) own bytes when it has them contiguously: no copy.
        if let decoded = utf8.withContiguousStorageIfAvailable({ decode(bytes: $0, table: table, allowPadding: allowPadding) }) {
            return decoded
        }
        return Array(utf8).withUnsafeBufferPointer { decode(bytes: $0, table: table, allowPadding: allowPadding) }
    }

    private static func decode(bytes input: UnsafeBufferPointer<UInt8>, table tableArray: [UInt8], allowPadding: Bool) -> [UInt8]? {
        let table = tableArray.span
        var count = input.count
        if allowPadding, count % 4 == 0, count > 0 {
            // Padding only ever completes the final quantum: at most two `=`.
            if input[count - 1] == UInt8(ascii: "=") {
                count -= 1
                if input[count - 1] == UInt8(ascii: "=") { count -= 1 }
            }
        }
        let remainder = count % 4
        guard remainder != 1 else { return nil }
        let fullGroups = count / 4
        let outputLength = fullGroups * 3 + (remainder == 0 ? 0 : remainder - 1)
        // An empty result without `Array(unsafeUninitializedCapacity: 0)`: that initializer stores
        // its count into the shared empty-array singleton, which ThreadSanitizer reported as a
        // race with another thread reading an empty array (two empty JWE parts at once).
        guard outputLength > 0 else { return [] }
        do {
            var valid = true
            let output = [UInt8](unsafeUninitializedCapacity: outputLength) { output, initialized in
                var index = 0
                var out = 0
                for _ in 0..<fullGroups {
                    let a = table[Int(input[index])], b = table[Int(input[index + 1])]
                    let c = table[Int(input[index + 2])], d = table[Int(input[index + 3])]
                    // Every valid value is < 64, so OR-ing them exposes any 0xFF marker.
                    if (a | b | c | d) & 0xC0 != 0 {
                        valid = false
                        break
                    }
                    let word = UInt32(a) << 18 | UInt32(b) << 12 | UInt32(c) << 6 | UInt32(d)
                    output[out] = UInt8(truncatingIfNeeded: word >> 16)
                    output[out + 1] = UInt8(truncatingIfNeeded: word >> 8)
                    output[out + 2] = UInt8(truncatingIfNeeded: word)
                    out += 3
                    index += 4
                }
                if valid, remainder > 0 {
                    let a = table[Int(input[index])], b = table[Int(input[index + 1])]
                    let c = remainder == 3 ? table[Int(input[index + 2])] : 0
                    if (a | b | c) & 0xC0 != 0 {
                        valid = false
                    } else {
                        let word = UInt32(a) << 18 | UInt32(b) << 12 | UInt32(c) << 6
                        output[out] = UInt8(truncatingIfNeeded: word >> 16)
                        out += 1
                        if remainder == 3 {
                            output[out] = UInt8(truncatingIfNeeded: word >> 8)
                            out += 1
                        }
                        // Bits below the last full byte must be zero (canonical encoding).
                        let unused = remainder == 3 ? word & 0xFF : word & 0xFFFF
                        if unused != 0 { valid = false }
                    }
                }
                initialized = valid ? outputLength : 0
            }
            return valid ? output : nil
        }
    }
}
