internal import AGCrypto

/// The Concat KDF of NIST SP 800-56A §5.8.1 with SHA-256, as JWE ECDH-ES uses it (RFC 7518
/// §4.6.2): `K(i) = SHA-256(i || Z || OtherInfo)` for `i = 1, 2, …`, concatenated and cut to
/// the key length.
public enum ConcatKDF {
    /// `OtherInfo` for JWE: `AlgorithmID || PartyUInfo || PartyVInfo` each prefixed by its
    /// 32-bit big-endian length, then `SuppPubInfo` = the key length in bits (32-bit big-endian).
    ///
    /// `algorithmID` is the `enc` value for direct key agreement (`A256GCM`) and the `alg`
    /// value for key wrapping; empty party infos are encoded as a zero length.
    public static func otherInfo(algorithmID: String, partyUInfo: [UInt8], partyVInfo: [UInt8],
                                 keyBitLength: Int) -> [UInt8] {
        let algorithm = Array(algorithmID.utf8)
        var info = [UInt8]()
        info.reserveCapacity(16 + algorithm.count + partyUInfo.count + partyVInfo.count)
        appendLengthPrefixed(algorithm, to: &info)
        appendLengthPrefixed(partyUInfo, to: &info)
        appendLengthPrefixed(partyVInfo, to: &info)
        appendBigEndian(UInt32(truncatingIfNeeded: keyBitLength), to: &info)
        return info
    }

    /// The first `byteCount` bytes of `K(1) || K(2) || …`.
    public static func deriveKey(sharedSecret: [UInt8], otherInfo: [UInt8], byteCount: Int) -> [UInt8] {
        precondition(byteCount >= 0, "negative key length")
        var key = [UInt8]()
        key.reserveCapacity(byteCount + SHA256.byteCount)
        var input = [UInt8]()
        input.reserveCapacity(4 + sharedSecret.count + otherInfo.count)
        var counter: UInt32 = 1
        while key.count < byteCount {
            input.removeAll(keepingCapacity: true)
            appendBigEndian(counter, to: &input)
            input += sharedSecret
            input += otherInfo
            key += SHA256.hash(input)
            counter += 1
        }
        return Array(key.prefix(byteCount))
    }

    /// The content key for JWE direct key agreement: `keyBitLength` bits derived from `Z` with
    /// `AlgorithmID` = `algorithmID` (the `enc` value) and the two party infos.
    public static func deriveKey(sharedSecret: [UInt8], algorithmID: String, partyUInfo: [UInt8],
                                 partyVInfo: [UInt8], keyBitLength: Int) -> [UInt8] {
        precondition(keyBitLength % 8 == 0, "key length must be whole bytes")
        let info = otherInfo(algorithmID: algorithmID, partyUInfo: partyUInfo, partyVInfo: partyVInfo,
                             keyBitLength: keyBitLength)
        return deriveKey(sharedSecret: sharedSecret, otherInfo: info, byteCount: keyBitLength / 8)
    }

    /// `data` preceded by its length as a 32-bit big-endian integer (the `Datalen || Data` of SP 800-56A).
    public static func appendLengthPrefixed(_ data: [UInt8], to output: inout [UInt8]) {
        appendBigEndian(UInt32(truncatingIfNeeded: data.count), to: &output)
        output += data
    }

    static func appendBigEndian(_ value: UInt32, to output: inout [UInt8]) {
        output.append(UInt8(truncatingIfNeeded: value >> 24))
        output.append(UInt8(truncatingIfNeeded: value >> 16))
        output.append(UInt8(truncatingIfNeeded: value >> 8))
        output.append(UInt8(truncatingIfNeeded: value))
    }
}
