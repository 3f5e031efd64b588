import Testing

@testable import AGCrypto

/// The worker's block of DRBG output: every draw is fresh bytes, across refills too, and a byte
/// handed out does not stay in the block.
@Suite struct SecureRandomBufferTests {
    @Test func drawsAreFreshAcrossRefills() {
        let random = SecureRandomBuffer()
        var seen = Set<[UInt8]>()
        // 32-byte draws with an odd one now and then, so some blocks end with bytes too few for
        // the next draw (which then comes from a new block).
        for round in 0..<200 {
            let draw = random.bytes(count: 32)
            #expect(draw.count == 32)
            #expect(seen.insert(draw).inserted, "draw \(round) repeated an earlier one")
            if round % 7 == 0 { _ = random.bytes(count: 13) }
        }
        var words = Set<UInt64>()
        for _ in 0..<500 { words.insert(random.next()) }
        #expect(words.count == 500)
    }

    @Test func handedOutBytesAreZeroedAndTheRestKept() {
        let random = SecureRandomBuffer()
        _ = random.bytes(count: 40)
        _ = random.next()
        #expect(random.position == 48)
        #expect(random.block[..<48].allSatisfy { $0 == 0 })
        #expect(random.block[48...].contains { $0 != 0 })
        let rest = Array(random.block[48..<80])
        #expect(random.bytes(count: 32) == rest)
    }

    @Test func aDrawTheBlockCannotFinishComesFromAFreshBlock() {
        let random = SecureRandomBuffer()
        _ = random.bytes(count: SecureRandomBuffer.blockSize - 10)
        let tail = Array(random.block[(SecureRandomBuffer.blockSize - 10)...])
        let draw = random.bytes(count: 16)
        #expect(random.position == 16)
        #expect(Array(draw.prefix(10)) != tail)
        #expect(random.block[..<16].allSatisfy { $0 == 0 })
    }
}
