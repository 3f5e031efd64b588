import AGEventLoop
import AGPolicy
import AGRedis
import AGTestSupport
import Foundation
import Testing

@testable import AGGateway

/// The host clock corrected by the Redis clock (`RedisClockAlignment` on a stand-in Redis whose
/// `TIME` a test moves): small offsets are followed, a wrong clock is corrected for at most
/// `AlignedTime.maximumOffset` and logged once, and its end is logged.
@Suite struct RedisClockAlignmentTests {
    /// A `TIME` answered at the end of a stall (sent before it, read after it) is no clock
    /// reading: ignored, the offset in use stays (a stall of 3 s read as a 1.5 s offset before).
    @Test func aMeasurementWithALongRoundTripIsIgnored() {
        let time = AlignedTime()
        #expect(time.record(reference: 1_000_050_000, sent: 1_000_000_000, received: 1_000_002_000) == 49_000)
        #expect(time.currentOffset == (49_000, true))
        #expect(time.record(reference: 1_003_000_000, sent: 1_000_000_000, received: 1_003_000_100) == nil, "a 3 s round trip")
        #expect(time.currentOffset == (49_000, true))
        #expect(time.record(reference: 1_000_000_000, sent: 1_000_000_000, received: 999_000_000) == nil, "the host clock went back")
        #expect(time.record(reference: 1_000_100_000, sent: 1_000_000_000, received: 1_000_000_000 + AlignedTime.maximumRoundTrip)
                == 100_000 - AlignedTime.maximumRoundTrip / 2)
    }

    @Test func aRedisClockYearsOffMovesTheTimeByTheBoundAtMostAndIsLoggedOnce() async throws {
        let sixYears = -6.0 * 365 * 86_400
        let clock = try await TestRedisClock.start(offset: sixYears)
        let logPath = NSTemporaryDirectory() + "agclock-log-" + UUID().uuidString.prefix(8)
        let fd = open(logPath, O_CREAT | O_WRONLY | O_APPEND, 0o600)
        defer { close(fd); unlink(logPath) }
        let logger = Logger(level: .info, format: .json, fileDescriptor: fd)
        func lines(_ text: String) -> Int { TestFile.textIfReadable(logPath).components(separatedBy: text).count - 1 }
        let time = AlignedTime()
        try await TestEventLoop.with { loop in
            let alignment = await loop.make { base in
                RedisClockAlignment(loop: base, url: try! RedisURL(parsing: clock.url), time: time, timeout: .seconds(2), logger: logger,
                                    interval: .milliseconds(20))
            }
            #expect(await eventually { time.currentOffset.measured })
            #expect(time.currentOffset.microseconds == -AlignedTime.maximumOffset, "bounded, not six years")
            #expect(abs(time.nowMicroseconds - SystemTime().nowMicroseconds + AlignedTime.maximumOffset) < 1_000_000)
            #expect(await eventually { lines("clock differs from Redis") == 1 })
            let logged = try #require(TestFile.textIfReadable(logPath).split(separator: "\n").first { $0.contains("clock differs") })
            #expect(logged.contains(#""applied_ms":-10000"#), "\(logged)")
            #expect(logged.contains(#""offset_ms":-18921"#), "about six years in ms: \(logged)")

            // Measured five times more: still one line while the offset stays.
            let asked = clock.timeRequests
            #expect(await eventually { clock.timeRequests >= asked + 5 })
            #expect(lines("clock differs from Redis") == 1)

            // Within the bound the offset is followed, and over 1 s it is still a wrong clock.
            try clock.setOffset(3)
            #expect(await eventually { abs(time.currentOffset.microseconds - 3_000_000) < 500_000 })
            #expect(await eventually { lines("clock differs from Redis") == 2 }, "a new offset is logged")

            try clock.setOffset(0)
            #expect(await eventually { abs(time.currentOffset.microseconds) < 500_000 })
            #expect(await eventually { lines("clock back in line with Redis") == 1 })
            await loop.submit { _ in alignment.value.close() }
        }
    }
}
