import AGCrypto

/// A tenant's *device epoch*: a counter in Redis (`ag:{APPID}:devepoch`, the tenant's slot)
/// that every script making a token of the tenant invalid bumps in the same atomic step
/// (`DeviceScripts.revoke`, `DeviceScripts.invalidate`). A worker that learns the epoch with
/// each `api` lease knows that a token whose device record it found in good standing at that
/// epoch is still good, without reading the record again.
///
/// A missing key is created from a random seed the caller passes, never from 0: a Redis that
/// restarted empty (or lost the key) then shows an epoch no worker remembers, so every cached
/// token is checked again and a record that is gone is refused.
enum DeviceEpoch {
    /// A fresh seed: 62 random bits in decimal, so `INCR` can count on from it for ever.
    static func seed() -> String {
        let bytes = SecureRandom.bytes(count: 8)
        let value = bytes.reduce(UInt64(0)) { $0 << 8 | UInt64($1) } >> 2
        return String(value)
    }
}
