import AGRedis
import Foundation
import AGSync

/// A throwaway `redis-server` process for tests: loopback TCP on a free port plus a unix
/// socket, no persistence, its own temp directory. Failure tests can pause, kill and restart it.
public final class RedisServer: Sendable {
    public static let executable = "/usr/bin/redis-server"

    public let port: Int
    public let password: String?
    /// Holds the unix socket and the log; removed when the server object is released.
    public let directory: String
    /// The running server's pid, `nil` once it has been reaped.
    private let pid = Locked<pid_t?>(nil)

    /// Where tests connect over TCP (with the password, if any).
    public var url: RedisURL {
        RedisURL(endpoint: .tcp(host: "127.0.0.1", port: port), password: password)
    }

    public var unixSocketPath: String { directory + "/redis.sock" }

    /// The same server over its unix socket.
    public var unixURL: RedisURL {
        RedisURL(endpoint: .unix(path: unixSocketPath), password: password)
    }

    public var logPath: String { directory + "/redis.log" }

    private init(port: Int, password: String?, directory: String) {
        self.port = port
        self.password = password
        self.directory = directory
    }

    deinit {
        signalAndWait(SIGKILL)
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Starts a private server on a free loopback port, retrying if the port is taken meanwhile.
    public static func start(password: String? = nil) async throws -> RedisServer {
        var lastError: any Error = RedisServerError.couldNotStart("no attempt made")
        for _ in 0..<5 {
            let directory = NSTemporaryDirectory() + "agredis-" + UUID().uuidString.prefix(8)
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            let server = RedisServer(port: try freeLoopbackPort(), password: password, directory: directory)
            do {
                try await server.launch()
                return server
            } catch {
                lastError = error
            }
        }
        throw lastError
    }

    /// Runs `body` with a private server (for tests that pause, kill, flush or reconfigure it)
    /// and stops the server afterwards.
    public static func withPrivate<R>(password: String? = nil, _ body: (RedisServer) async throws -> R) async throws -> R {
        let server = try await start(password: password)
        defer { server.stop() }
        return try await body(server)
    }

    /// Runs `body` against the server named by `AG_TEST_REDIS_URL` (started once by
    /// scripts/test), or a private one when it is unset. Tests must use unique keys and leave
    /// server-wide state (config, scripts, databases) alone.
    public static func withShared<R>(_ body: (RedisURL) async throws -> R) async throws -> R {
        if let text = ProcessInfo.processInfo.environment["AG_TEST_REDIS_URL"], !text.isEmpty {
            return try await body(try RedisURL(parsing: text))
        }
        return try await withPrivate { server in try await body(server.url) }
    }

    /// Starts the server again on the same port and directory, after `stop()` or `kill()`.
    public func restart() async throws {
        try await launch()
    }

    /// Stops the server with SIGTERM and waits for it to exit.
    public func stop() {
        signalAndWait(SIGTERM)
    }

    /// Kills the server with SIGKILL (no clean shutdown) and waits for it to exit.
    public func kill() {
        signalAndWait(SIGKILL)
    }

    /// Freezes the server (SIGSTOP): connections stay open, nothing is answered.
    public func pause() {
        signal(SIGSTOP)
    }

    /// Resumes a paused server (SIGCONT).
    public func resume() {
        signal(SIGCONT)
    }

    private func signal(_ signal: Int32) {
        pid.withLock { pid in
            if let pid { _ = Foundation.kill(pid, signal) }
        }
    }

    /// Signals the server (resuming it first if paused) and reaps it.
    private func signalAndWait(_ signal: Int32) {
        pid.withLock { pid in
            guard let running = pid else { return }
            Foundation.kill(running, SIGCONT)
            Foundation.kill(running, signal)
            var status: Int32 = 0
            while waitpid(running, &status, 0) == -1, errno == EINTR {}
            pid = nil
        }
    }

    /// True while the process has not exited; reaps it if it has.
    private var isRunning: Bool {
        pid.withLock { pid in
            guard let running = pid else { return false }
            var status: Int32 = 0
            if waitpid(running, &status, WNOHANG) == running {
                pid = nil
                return false
            }
            return true
        }
    }

    /// Spawns redis-server with stdout/stderr on /dev/null and default signal handling.
    private static func spawn(_ arguments: [String]) throws -> pid_t {
        try spawnProgram(executable, arguments)
    }

    private func launch() async throws {
        var arguments = [
            "--port", String(port), "--bind", "127.0.0.1",
            "--unixsocket", unixSocketPath, "--unixsocketperm", "700",
            "--save", "", "--appendonly", "no",
            "--dir", directory, "--logfile", logPath, "--daemonize", "no",
        ]
        if let password {
            arguments += ["--requirepass", password]
        }
        let spawned = try Self.spawn(arguments)
        pid.withLock { $0 = spawned }

        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline {
            guard isRunning else {
                let log = TestFile.textIfReadable(logPath)
                throw RedisServerError.couldNotStart("redis-server exited: \(log.suffix(500))")
            }
            if Self.answersPing(port: port) { return }
            try await Task.sleep(for: .milliseconds(10))
        }
        stop()
        throw RedisServerError.couldNotStart("redis-server on port \(port) did not answer PING within 10s")
    }

    /// True once anything answers an inline PING on the port (`+PONG`, or `-NOAUTH` with a password).
    private static func answersPing(port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var timeout = timeval(tv_sec: 1, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = loopback(port: port)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else { return false }
        let ping = Array("PING\r\n".utf8)
        guard write(fd, ping, ping.count) == ping.count else { return false }
        var reply = [UInt8](repeating: 0, count: 64)
        let count = read(fd, &reply, reply.count)
        return count > 0 && (reply[0] == UInt8(ascii: "+") || reply[0] == UInt8(ascii: "-"))
    }

    /// A free loopback port; the caller may still lose a race for it.
    private static func freeLoopbackPort() throws -> Int {
        let port = Int(unusedLoopbackPort())
        guard port > 0 else { throw RedisServerError.couldNotStart("cannot bind a loopback port") }
        return port
    }

    private static func loopback(port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        return address
    }
}

public enum RedisServerError: Error, CustomStringConvertible {
    case couldNotStart(String)

    public var description: String {
        switch self {
        case .couldNotStart(let reason): "could not start redis-server: \(reason)"
        }
    }
}
