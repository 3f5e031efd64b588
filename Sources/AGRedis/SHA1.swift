/// SHA-1 (FIPS 180-4), only to name Lua scripts the way Redis does (`EVALSHA`); not for security.
struct SHA1 {
    private var state: (UInt32, UInt32, UInt32, UInt32, UInt32) =
        (0x6745_2301, 0xEFCD_AB89, 0x98BA_DCFE, 0x1032_5476, 0xC3D2_E1F0)

    static func hexDigest(_ message: some Collection<UInt8>) -> String {
        var hasher = SHA1()
        var padded = Array(message)
        let bitLength = UInt64(padded.count) * 8
        padded.append(0x80)
        while padded.count % 64 != 56 { padded.append(0) }
        for shift in stride(from: 56, through: 0, by: -8) { padded.append(UInt8(truncatingIfNeeded: bitLength >> UInt64(shift))) }
        for start in stride(from: 0, to: padded.count, by: 64) {
            hasher.compress(padded[start..<start + 64])
        }
        let (a, b, c, d, e) = hasher.state
        return [a, b, c, d, e].map { word in
            let hex = String(word, radix: 16)
            return String(repeating: "0", count: 8 - hex.count) + hex
        }.joined()
    }

    private mutating func compress(_ block: ArraySlice<UInt8>) {
        var w = [UInt32](repeating: 0, count: 80)
        var index = block.startIndex
        for t in 0..<16 {
            w[t] = UInt32(block[index]) << 24 | UInt32(block[index + 1]) << 16
                | UInt32(block[index + 2]) << 8 | UInt32(block[index + 3])
            index += 4
        }
        for t in 16..<80 { w[t] = rotl(w[t - 3] ^ w[t - 8] ^ w[t - 14] ^ w[t - 16], 1) }

        var (a, b, c, d, e) = state
        for t in 0..<80 {
            let f: UInt32
            let k: UInt32
            switch t {
            case 0..<20: f = (b & c) | (~b & d); k = 0x5A82_7999
            case 20..<40: f = b ^ c ^ d; k = 0x6ED9_EBA1
            case 40..<60: f = (b & c) | (b & d) | (c & d); k = 0x8F1B_BCDC
            default: f = b ^ c ^ d; k = 0xCA62_C1D6
            }
            let temp = rotl(a, 5) &+ f &+ e &+ k &+ w[t]
            (e, d, c, b, a) = (d, c, rotl(b, 30), a, temp)
        }
        state = (state.0 &+ a, state.1 &+ b, state.2 &+ c, state.3 &+ d, state.4 &+ e)
    }

    private func rotl(_ x: UInt32, _ n: UInt32) -> UInt32 { x << n | x >> (32 - n) }
}
