public import AGCrypto
internal import AGJOSE

/// Apple's Concat KDF party infos for the Platform SSO JWE (RFC 7518 §4.6.1.2–3), all lengths
/// 32-bit big-endian:
/// - PartyUInfo (`apu`) = `len || "APPLE" || len || epk` — the server's ephemeral key, X9.63;
/// - PartyVInfo (`apv`) = `len || "Apple" || len || device encryption key (X9.63) || len || nonce`.
public enum ApplePartyInfo {
    /// The label that opens PartyUInfo (the server's side).
    public static let partyULabel = Array("APPLE".utf8)
    /// The label that opens PartyVInfo (the device's side).
    public static let partyVLabel = Array("Apple".utf8)

    /// `apu` for a response encrypted with `ephemeralKey`; a Mac checks that its second field
    /// is the header's `epk` as a 65-byte point.
    public static func partyUInfo(ephemeralKey: P256.PublicKey) -> [UInt8] {
        var info = [UInt8]()
        info.reserveCapacity(4 + partyULabel.count + 4 + P256.x963ByteCount)
        ConcatKDF.appendLengthPrefixed(partyULabel, to: &info)
        ConcatKDF.appendLengthPrefixed(ephemeralKey.x963Representation, to: &info)
        return info
    }

    /// `apv` as a Mac builds it (for the device client and tests).
    public static func partyVInfo(encryptionKey: P256.PublicKey, nonce: [UInt8]) -> [UInt8] {
        var info = [UInt8]()
        info.reserveCapacity(12 + partyVLabel.count + P256.x963ByteCount + nonce.count)
        ConcatKDF.appendLengthPrefixed(partyVLabel, to: &info)
        ConcatKDF.appendLengthPrefixed(encryptionKey.x963Representation, to: &info)
        ConcatKDF.appendLengthPrefixed(nonce, to: &info)
        return info
    }

    /// The fields of a device's PartyVInfo.
    public struct PartyVInfo: Sendable, Equatable {
        /// The device encryption key the response must be encrypted to, as sent (65 bytes, `0x04 || x || y`).
        public let encryptionKey: [UInt8]
        /// The request's `nonce`, as bytes.
        public let nonce: [UInt8]
    }

    /// Parses `apv`: exactly three length-prefixed fields, the label `Apple` (exact case), a
    /// 65-byte uncompressed point, a nonce, and nothing after them. The point is not checked
    /// against the curve here: the verifier compares it with the registered key.
    public static func parsePartyVInfo(_ bytes: [UInt8]) throws(PartyInfoError) -> PartyVInfo {
        var offset = 0
        func field(_ name: String) throws(PartyInfoError) -> ArraySlice<UInt8> {
            guard bytes.count - offset >= 4 else { throw PartyInfoError("\(name): length missing") }
            let length = bytes[offset..<offset + 4].reduce(0) { $0 << 8 | Int($1) }
            offset += 4
            guard length <= bytes.count - offset else { throw PartyInfoError("\(name): length \(length) exceeds the data") }
            defer { offset += length }
            return bytes[offset..<offset + length]
        }
        guard try field("label").elementsEqual(partyVLabel) else { throw PartyInfoError("label is not Apple") }
        let key = try field("encryption key")
        guard key.count == P256.x963ByteCount, key.first == 0x04 else {
            throw PartyInfoError("encryption key is not a 65-byte uncompressed point")
        }
        let nonce = try field("nonce")
        guard offset == bytes.count else { throw PartyInfoError("\(bytes.count - offset) bytes after the nonce") }
        return PartyVInfo(encryptionKey: Array(key), nonce: Array(nonce))
    }
}

/// Why an `apv` was refused.
public struct PartyInfoError: Error, Sendable, Equatable, CustomStringConvertible {
    public let reason: String

    public init(_ reason: String) { self.reason = reason }

    public var description: String { reason }
}
