#if canImport(Glibc)
import Glibc
#endif
import Testing
@testable import AGGateway

/// `log.format: text`: every value stays on its line (a sweep of stop 35's fixes forged whole
/// log lines with a tenant file name holding a newline).
@Suite struct LoggerTextFormatTests {
    static func line(_ value: String) throws -> String {
        var fds: [Int32] = [0, 0]
        try #require(pipe(&fds) == 0)
        defer { close(fds[0]) }
        Logger(level: .info, format: .text, fileDescriptor: fds[1]).warn("config rejected", [("file", .string(value)), ("n", 1)])
        close(fds[1])
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = read(fds[0], &buffer, buffer.count)
        return String(decoding: buffer[..<max(0, count)], as: UTF8.self)
    }

    @Test(arguments: [
        ("t.yaml", "file=t.yaml n=1"),
        ("a b.yaml", #"file="a b.yaml" n=1"#),
        ("x.yaml\n2026-12-04T00:00:00.000Z ERROR forged", #"file="x.yaml\n2026-12-04T00:00:00.000Z ERROR forged" n=1"#),
        ("q\"uote\\d\r\t\u{1B}[31m", #"file="q\"uote\\d\r\t\u001b[31m" n=1"#),
        ("\u{9B}31m", #"file="\u009b31m" n=1"#),
        ("", #"file="" n=1"#),
        ("café", "file=café n=1"),
    ])
    func valuesNeverLeaveTheirLine(_ value: String, _ expected: String) throws {
        let line = try Self.line(value)
        #expect(line.hasSuffix(" WARN config rejected " + expected + "\n"), "\(line)")
        #expect(line.filter { $0 == "\n" }.count == 1)
    }
}
