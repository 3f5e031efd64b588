/// Redis Cluster key hashing: `CRC16(key) mod 16384`, where only the `{…}` hash tag counts
/// when the key has one (the first `{` followed, after at least one byte, by a `}`).
public enum HashSlot {
    public static let count = 16384

    /// The slot of `key`.
    public static func slot(of key: some Collection<UInt8>) -> UInt16 {
        UInt16(crc16(hashedPart(of: key)) % UInt16(count))
    }

    /// The slot of a UTF-8 key.
    public static func slot(of key: String) -> UInt16 {
        slot(of: key.utf8)
    }

    /// The bytes that decide the slot: the hash tag's content, or the whole key.
    static func hashedPart<Key: Collection<UInt8>>(of key: Key) -> Key.SubSequence {
        guard let open = key.firstIndex(of: UInt8(ascii: "{")) else { return key[...] }
        let afterOpen = key.index(after: open)
        guard let close = key[afterOpen...].firstIndex(of: UInt8(ascii: "}")), close != afterOpen else {
            return key[...]
        }
        return key[afterOpen..<close]
    }

    /// CRC-16/XMODEM (polynomial 0x1021, initial value 0, no reflection), as the cluster
    /// specification defines it. Bitwise: keys are short, and this keeps no table around.
    public static func crc16(_ bytes: some Sequence<UInt8>) -> UInt16 {
        var crc: UInt16 = 0
        for byte in bytes {
            crc ^= UInt16(byte) << 8
            for _ in 0..<8 {
                crc = crc & 0x8000 != 0 ? (crc << 1) ^ 0x1021 : crc << 1
            }
        }
        return crc
    }
}
