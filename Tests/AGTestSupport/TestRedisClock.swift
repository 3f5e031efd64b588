import Foundation

/// A stand-in Redis server that answers `PING` and `TIME` (`Tests/Fixtures/redis_clock.py`),
/// its `TIME` this host's clock moved by an offset a test changes while it runs: for what the
/// gateway does with a Redis clock that is wrong.
public final class TestRedisClock: Sendable {
    public let port: Int
    private let directory: String
    private let pid: pid_t

    /// `redis://127.0.0.1:<port>/0`.
    public var url: String { "redis://127.0.0.1:\(port)/0" }

    /// Starts the server with `offset` seconds and waits (on a thread of its own) until it listens.
    public static func start(offset: Double) async throws -> TestRedisClock {
        let directory = NSTemporaryDirectory() + "agclock-" + UUID().uuidString.prefix(8)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try String(offset).write(toFile: directory + "/offset", atomically: true, encoding: .utf8)
        let (pid, port) = try await FixtureProcess.start("redis_clock.py", [directory + "/offset", directory + "/port"],
                                                           portFile: directory + "/port")
        return TestRedisClock(port: port, directory: directory, pid: pid)
    }

    private init(port: Int, directory: String, pid: pid_t) {
        self.port = port
        self.directory = directory
        self.pid = pid
    }

    deinit {
        FixtureProcess.stop(pid, removing: directory)
    }

    /// How many `TIME` commands it answered so far.
    public var timeRequests: Int { TestFile.textIfReadable(directory + "/offset.count").count }

    /// Moves the clock: the next `TIME` answers this host's time plus `offset` seconds.
    public func setOffset(_ offset: Double) throws {
        try String(offset).write(toFile: directory + "/offset", atomically: true, encoding: .utf8)
    }
}
