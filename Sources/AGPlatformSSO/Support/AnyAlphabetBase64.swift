internal import AGFormats

/// Base64 in either alphabet (RFC 4648 §4 or §5), padding optional, otherwise strict: what
/// Macs, IdPs and admin tools variously send for key ids and raw keys.
enum AnyAlphabetBase64 {
    /// The decoded bytes, or nil for a mix of both alphabets (nobody produces one), characters
    /// outside them, whitespace, misplaced or wrong padding, or non-zero trailing bits.
    static func decode(_ text: some StringProtocol) -> [UInt8]? {
        var sawURLSafe = false, sawStandard = false
        let translated = text.utf8.map { byte -> UInt8 in
            switch byte {
            case UInt8(ascii: "-"): sawURLSafe = true; return UInt8(ascii: "+")
            case UInt8(ascii: "_"): sawURLSafe = true; return UInt8(ascii: "/")
            case UInt8(ascii: "+"), UInt8(ascii: "/"): sawStandard = true; return byte
            default: return byte
            }
        }
        guard !(sawURLSafe && sawStandard) else { return nil }
        return Base64.decode(utf8: translated)
    }
}
