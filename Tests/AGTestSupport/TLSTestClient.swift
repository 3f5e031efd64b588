import Foundation

/// A real TLS client for tests: `Tests/Fixtures/tls_client.py` (CPython's `ssl`, i.e. OpenSSL
/// through another code base than ours), every request over one connection.
public enum TLSTestClient {
    /// One request; the body is sent as given.
    public struct Request: Encodable, Sendable {
        public var method: String
        public var target: String
        public var headers: [String: String]
        public var body: String?

        public init(_ method: String = "GET", _ target: String, headers: [String: String] = [:], body: String? = nil) {
            self.method = method
            self.target = target
            self.headers = headers
            self.body = body
        }
    }

    /// How to connect: `caFile` nil skips verification; versions are `TLSv1_1`, `TLSv1_2`, …
    public struct Options: Encodable, Sendable {
        public var port: Int
        public var host = "127.0.0.1"
        public var serverHostname: String?
        public var caFile: String?
        public var minVersion: String?
        public var maxVersion: String?
        public var alpn: [String]?
        public var ciphers: String?
        public var requests: [Request] = []
        /// After the first response, create this file, then wait for `resumeFile` to exist.
        public var pausedFile: String?
        public var resumeFile: String?

        public init(port: Int, caFile: String? = nil, serverHostname: String? = nil, requests: [Request] = []) {
            self.port = port
            self.caFile = caFile
            self.serverHostname = serverHostname
            self.requests = requests
        }
    }

    public struct Response: Decodable, Sendable {
        public let status: Int
        public let headers: [String: String]
        public let body: String
    }

    /// What the client saw.
    public struct Result: Decodable, Sendable {
        public let ok: Bool
        /// `handshake` or `request` when `ok` is false.
        public let stage: String?
        public let error: String?
        public let version: String?
        public let alpn: String?
        public let cipher: String?
        /// Hex SHA-256 of the server certificate's DER.
        public let peerSha256: String?
        /// Every request went over the first connection.
        public let sameSocket: Bool?
        public let responses: [Response]?
    }

    /// Runs the client to completion.
    public static func run(_ options: Options) throws -> Result {
        let encoder = JSONEncoder()
        encoder.keyEncodingStrategy = .convertToSnakeCase
        let path = NSTemporaryDirectory() + "agtls-options-" + UUID().uuidString + ".json"
        try encoder.encode(options).write(to: URL(fileURLWithPath: path))
        defer { unlink(path) }
        let (_, output) = try runProgram("/usr/bin/env", ["python3", TestGateway.fixturePath("tls_client.py"), path])
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        return try decoder.decode(Result.self, from: output)
    }

    /// Runs the client on a thread of its own (it may wait for `resumeFile`), so the caller
    /// can act while the connection is open.
    public static func start(_ options: Options) -> Task<Result, any Error> {
        // The thread starts now, not when the cooperative pool (two threads here, often all
        // busy with blocking tests) gets to a task: the caller waits for the client's files.
        let outcome = ThreadOutcome<Result>()
        Thread { outcome.finish(Swift.Result { try run(options) }) }.start()
        return Task.detached { try await outcome.value() }
    }
}

/// Runs `body` on a thread of its own, started now, and awaits its result: for a blocking
/// request that must be under way while the test does something else (a task might wait for
/// the cooperative pool, often busy with blocking tests, past the point it mattered).
public func startOnThread<Value: Sendable>(_ body: @escaping @Sendable () throws -> Value) -> Task<Value, any Error> {
    let outcome = ThreadOutcome<Value>()
    Thread { outcome.finish(Swift.Result { try body() }) }.start()
    return Task.detached { try await outcome.value() }
}

/// The result of work on a thread of its own, awaited by a task.
final class ThreadOutcome<Value: Sendable>: @unchecked Sendable {
    // Invariant: `result` and `waiter` are touched only under `lock`; one of them is nil.
    private let lock = NSLock()
    private var result: Swift.Result<Value, any Error>?
    private var waiter: CheckedContinuation<Value, any Error>?

    func finish(_ outcome: Swift.Result<Value, any Error>) {
        lock.lock()
        if let waiter {
            self.waiter = nil
            lock.unlock()
            waiter.resume(with: outcome)
        } else {
            result = outcome
            lock.unlock()
        }
    }

    func value() async throws -> Value {
        try await withCheckedThrowingContinuation { continuation in
            lock.lock()
            if let result {
                lock.unlock()
                continuation.resume(with: result)
            } else {
                waiter = continuation
                lock.unlock()
            }
        }
    }
}
