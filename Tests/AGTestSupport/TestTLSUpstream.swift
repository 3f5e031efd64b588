import Foundation

/// A real https upstream on loopback (`Tests/Fixtures/tls_upstream.py`, CPython's ssl): serves
/// HTTP/1.1 keep-alive over TLS with the certificate chain it is given, and logs every accepted
/// connection, handshake (with the SNI the client sent) and request, so a test can see what the
/// gateway did on the wire.
public final class TestTLSUpstream: Sendable {
    /// One line of the upstream's event log.
    public struct Event: Sendable, Equatable {
        /// `accept`, `handshake`, `handshake_failed` or `request`.
        public let kind: String
        public let connection: Int
        /// The server name the client sent (handshakes), nil when it sent none.
        public let sni: String?
        /// The request target (requests).
        public let target: String?
        public let host: String?
        public let error: String?
    }

    public let port: Int
    /// The address it listens on.
    public let address: String
    private let directory: String
    private let pid: pid_t

    /// Starts the upstream with `chainPEM` and `keyPEM` on `address` and waits until it listens.
    public static func start(chainPEM: String, keyPEM: String, address: String = "127.0.0.1") throws -> TestTLSUpstream {
        let directory = NSTemporaryDirectory() + "agtlsup-" + UUID().uuidString.prefix(8)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try chainPEM.write(toFile: directory + "/chain.pem", atomically: true, encoding: .utf8)
        try keyPEM.write(toFile: directory + "/key.pem", atomically: true, encoding: .utf8)
        let pid = try spawnProgram("/usr/bin/env", ["python3", TestGateway.fixturePath("tls_upstream.py"), directory + "/chain.pem",
                                                    directory + "/key.pem", address, directory + "/port", directory + "/events.log"])
        // Polled on this thread: a loaded cooperative pool must not stretch the wait.
        let deadline = ContinuousClock.now + .seconds(30)
        var status: Int32 = 0
        while ContinuousClock.now < deadline, waitpid(pid, &status, WNOHANG) == 0 {
            if let text = try? TestFile.text(directory + "/port"), let port = Int(text) {
                return TestTLSUpstream(port: port, address: address, directory: directory, pid: pid)
            }
            usleep(10_000)
        }
        kill(pid, SIGKILL)
        waitpid(pid, &status, 0)
        try? FileManager.default.removeItem(atPath: directory)
        throw RedisServerError.couldNotStart("tls_upstream.py did not start")
    }

    private init(port: Int, address: String, directory: String, pid: pid_t) {
        self.port = port
        self.address = address
        self.directory = directory
        self.pid = pid
    }

    deinit {
        FixtureProcess.stop(pid, removing: directory)
    }

    /// Every event so far, in order.
    public var events: [Event] {
        let text = TestFile.textIfReadable(directory + "/events.log")
        return text.split(separator: "\n").compactMap { line in
            guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                  let kind = object["event"] as? String, let connection = object["connection"] as? Int else { return nil }
            return Event(kind: kind, connection: connection, sni: object["sni"] as? String, target: object["target"] as? String,
                         host: object["host"] as? String, error: object["error"] as? String)
        }
    }

    /// TCP connections accepted so far.
    public var acceptedConnections: Int { events.filter { $0.kind == "accept" }.count }

    /// Requests served so far.
    public var requests: [Event] { events.filter { $0.kind == "request" } }
}
