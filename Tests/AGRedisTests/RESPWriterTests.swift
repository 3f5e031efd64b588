@testable import AGRedis
import Testing

/// The gateway's own RESP encoding must be byte for byte what hiredis's formatter writes (the
/// live-server suites then prove the commands work); checked on spelled-out bytes and against
/// `redisFormatCommandArgv` itself for awkward arguments.
@Suite struct RESPWriterTests {
    private func encoded(_ arguments: RedisArguments) -> [UInt8] {
        var writer = RESPWriter()
        writer.encode(arguments)
        #expect(writer.terminated.last == 0 && writer.terminated.count == writer.bytes.count + 1)
        return Array(writer.bytes)
    }

    @Test func spelledOut() {
        #expect(encoded(.strings(["PING"])) == Array("*1\r\n$4\r\nPING\r\n".utf8))
        #expect(encoded(.strings(["SET", "k", ""])) == Array("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n".utf8))
        #expect(encoded(.bytes([Array("GET".utf8), [0x0D, 0x0A, 0x00, 0xFF]]))
                == Array("*2\r\n$3\r\nGET\r\n$4\r\n".utf8) + [0x0D, 0x0A, 0x00, 0xFF] + [0x0D, 0x0A])
    }

    @Test func sameBytesAsHiredis() {
        let long = String(repeating: "ab", count: 5_000)
        let many = (0..<123).map { "arg\($0)" }
        let cases: [RedisArguments] = [
            .strings(["EVALSHA", String(repeating: "f", count: 40), "2", "ag:{TEAM.app}:dev:q+/Z==", "ag:{TEAM.app}:ch:c", "1764612000000000", ""]),
            .strings(["SET", "clé", "värde ✓", long]),
            .strings(["RPUSH", "list"] + many),
            .strings(["MSET"] + (0..<9).map { "k\($0)" }),
            .bytes([Array("SET".utf8), [], Array(0...255)]),
            .bytes((0..<10).map { [UInt8]($0 == 0 ? Array("DEL".utf8) : [UInt8($0), 0x0D]) }),
        ]
        for (index, arguments) in cases.enumerated() {
            // Compared outside the expectation, which would print a 10 KB argument twice.
            let same = encoded(arguments) == hiredisFormatted(arguments)
            #expect(same, "case \(index)")
        }
    }

    /// Lengths and counts at each change of digit count (the header writes one digit inline
    /// and counts the others), and a command that outgrows the first buffer. Compared outside
    /// the expectation, which would print both 64 KiB arrays on a mismatch.
    @Test func lengthsAtDigitBoundaries() {
        for length in [9, 10, 11, 99, 100, 101, 999, 1_000, 65_536] {
            let arguments = RedisArguments.strings(["SET", "k", String(repeating: "x", count: length)])
            let same = encoded(arguments) == hiredisFormatted(arguments)
            #expect(same, "argument of \(length) bytes")
        }
        for count in [9, 10, 11, 99, 100, 101] {
            let arguments = RedisArguments.strings(Array(repeating: "a", count: count))
            let same = encoded(arguments) == hiredisFormatted(arguments)
            #expect(same, "\(count) arguments")
        }
    }

    @Test func reusedBufferHoldsOnlyTheLastCommand() {
        var writer = RESPWriter()
        writer.encode(.strings(["SET", "a-much-longer-key", String(repeating: "v", count: 300)]))
        writer.encode(.strings(["GET", "k"]))
        #expect(Array(writer.bytes) == Array("*2\r\n$3\r\nGET\r\n$1\r\nk\r\n".utf8))
    }
}
