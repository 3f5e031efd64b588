import Foundation

/// A real DNS server on a loopback UDP port (`Tests/Fixtures/dns_server.py`) whose zone a test
/// rewrites while it runs, and which logs every query it receives.
public final class TestDNSServer: Sendable {
    /// One name's answers: A and AAAA records with one TTL, or a failure mode.
    public struct Entry: Sendable {
        public var a: [String]
        public var aaaa: [String]
        public var ttl: Int
        /// `answer`, `drop` (never replies) or `servfail`.
        public var mode: String

        public init(a: [String] = [], aaaa: [String] = [], ttl: Int = 60, mode: String = "answer") {
            self.a = a
            self.aaaa = aaaa
            self.ttl = ttl
            self.mode = mode
        }
    }

    public let port: Int
    private let directory: String
    private let pid: pid_t

    /// `127.0.0.1:<port>`, for `DNSResolver.Configuration.nameservers`.
    public var nameserver: String { "127.0.0.1:\(port)" }

    /// Starts the server with `zone` and waits until it listens.
    public static func start(_ zone: [String: Entry]) async throws -> TestDNSServer {
        let directory = NSTemporaryDirectory() + "agdns-" + UUID().uuidString.prefix(8)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try write(zone, to: directory + "/zone.json")
        let (pid, port) = try await FixtureProcess.start("dns_server.py", [directory + "/zone.json", directory + "/port",
                                                                           directory + "/queries.log"], portFile: directory + "/port")
        return TestDNSServer(port: port, directory: directory, pid: pid)
    }

    private init(port: Int, directory: String, pid: pid_t) {
        self.port = port
        self.directory = directory
        self.pid = pid
    }

    deinit {
        FixtureProcess.stop(pid, removing: directory)
    }

    /// Replaces the zone; the next query sees it.
    public func setZone(_ zone: [String: Entry]) throws {
        try Self.write(zone, to: directory + "/zone.json")
    }

    /// How many queries of `type` (`A`, `AAAA`) for `name` arrived so far.
    public func queries(_ name: String, type: String = "A") -> Int {
        let log = TestFile.textIfReadable(directory + "/queries.log")
        return log.split(separator: "\n").filter { $0 == "\(name.lowercased()) \(type)" }.count
    }

    private static func write(_ zone: [String: Entry], to path: String) throws {
        var json: [String: Any] = [:]
        for (name, entry) in zone {
            json[name.lowercased()] = ["A": entry.a, "AAAA": entry.aaaa, "ttl": entry.ttl, "mode": entry.mode]
        }
        let data = try JSONSerialization.data(withJSONObject: json)
        // Atomic: the server re-reads the file on every query.
        try data.write(to: URL(fileURLWithPath: path), options: .atomic)
    }
}
