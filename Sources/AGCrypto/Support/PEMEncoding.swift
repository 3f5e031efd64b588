/// Renders DER as PEM text (RFC 7468: base64 in 64-character lines).
///
/// Kept here rather than in the formats module because that module depends on this one.
package enum PEMEncoding {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    package static func encode(label: String, der: [UInt8]) -> String {
        var base64 = [UInt8]()
        base64.reserveCapacity((der.count + 2) / 3 * 4)
        var index = 0
        while index < der.count {
            let b0 = der[index]
            let b1 = index + 1 < der.count ? der[index + 1] : 0
            let b2 = index + 2 < der.count ? der[index + 2] : 0
            base64.append(alphabet[Int(b0 >> 2)])
            base64.append(alphabet[Int((b0 & 0x03) << 4 | b1 >> 4)])
            base64.append(index + 1 < der.count ? alphabet[Int((b1 & 0x0F) << 2 | b2 >> 6)] : UInt8(ascii: "="))
            base64.append(index + 2 < der.count ? alphabet[Int(b2 & 0x3F)] : UInt8(ascii: "="))
            index += 3
        }
        var text = "-----BEGIN \(label)-----\n"
        var line = 0
        while line < base64.count {
            let end = min(line + 64, base64.count)
            text += String(decoding: base64[line..<end], as: UTF8.self)
            text += "\n"
            line = end
        }
        return text + "-----END \(label)-----\n"
    }
}
