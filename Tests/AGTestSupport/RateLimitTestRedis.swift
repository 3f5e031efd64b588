#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// A throwaway `redis-server` on a free port that a test may stop and start again (same port,
/// empty data), to see what happens while Redis is gone.
public final class RateLimitTestRedis: @unchecked Sendable {
    // Invariant: `process` is only touched by the test that owns this server, from one task.
    public let port: Int
    private var process: Process?

    public var url: String { "redis://127.0.0.1:\(port)/0" }

    public init() throws {
        port = try Self.freePort()
        try start()
    }

    deinit {
        stop()
    }

    /// Starts the server and waits until it accepts connections.
    public func start() throws {
        guard process == nil else { return }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/redis-server")
        process.arguments = ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        self.process = process
        let deadline = Date().addingTimeInterval(5)
        while !Self.accepts(port: port) {
            guard Date() < deadline else { throw RateLimitTestRedisError.notReady(port) }
            usleep(10_000)
        }
    }

    /// Kills the server and waits for it to exit.
    ///
    /// SIGKILL, because a child spawned from a test thread inherits that thread's signal mask,
    /// which may block SIGTERM.
    public func stop() {
        guard let process else { return }
        self.process = nil
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    private static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(fd, pointer, length) == 0 && getsockname(fd, pointer, &length) == 0
            }
        }
        guard bound else { throw RateLimitTestRedisError.noPort }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    private static func accepts(port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }
}

public enum RateLimitTestRedisError: Error {
    case noPort
    case notReady(Int)
}
