import AGRedis
import Foundation

/// A group of daemonized redis-server processes started by `scripts/lib.sh` (the same code
/// `scripts/test` uses), with their files in one temporary directory: a 3+3 Redis Cluster or
/// a Sentinel set. Failure tests kill, pause and restart single nodes by port.
public class RedisProcessGroup: @unchecked Sendable {
    // Invariant: every stored property is immutable after init; process control goes through
    // pid files and redis-cli, which are safe from any thread.
    public let directory: String
    /// Data node ports (a cluster: all six; a sentinel set: primary first, then the replicas).
    public let ports: [Int]

    init(directory: String, ports: [Int]) {
        self.directory = directory
        self.ports = ports
    }

    deinit {
        _ = try? Self.shell("stop_redis_group \"$1\"", directory)
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Runs a lib.sh function; throws with its output when it fails.
    static func shell(_ script: String, _ arguments: String...) throws -> String {
        try runShell(script, arguments)
    }

    /// `shell` on a thread of its own: starting a group takes seconds, which must not hold one
    /// of the two cooperative threads every other test runs on.
    static func detachedShell(_ script: String, _ arguments: String...) async throws -> String {
        try await withCheckedThrowingContinuation { continuation in
            Thread {
                continuation.resume(with: Result { try runShell(script, arguments) })
            }.start()
        }
    }

    private static func runShell(_ script: String, _ arguments: [String]) throws -> String {
        let library = TestGateway.fixturePath("../../scripts/lib.sh")
        let (status, output) = try runProgram("/bin/bash", ["-c", "source \"\(library)\"; \(script)", "bash"] + arguments,
                                              mergingErrors: true)
        let text = String(decoding: output, as: UTF8.self)
        guard status == 0 else { throw RedisServerError.couldNotStart(text) }
        return text
    }

    static func makeDirectory(_ prefix: String) -> String {
        NSTemporaryDirectory() + prefix + "-" + UUID().uuidString.prefix(8)
    }

    static func readPorts(_ path: String) throws -> [Int] {
        try TestFile.text(path).split(whereSeparator: \.isWhitespace).compactMap { Int($0) }
    }

    /// `redis-cli -p <port> <arguments…>`, output trimmed.
    @discardableResult
    public func cli(_ port: Int, _ arguments: String...) throws -> String {
        try cli(port, arguments)
    }

    public func cli(_ port: Int, _ arguments: [String]) throws -> String {
        let output = try runProgram("/usr/bin/redis-cli", ["-p", String(port)] + arguments).output
        return String(decoding: output, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// SIGKILL: the node dies without a word, its clients see a reset or silence.
    public func kill(_ port: Int) { signal(port, SIGKILL) }
    /// SIGSTOP: connections stay open, nothing is answered.
    public func pause(_ port: Int) { signal(port, SIGSTOP) }
    public func resume(_ port: Int) { signal(port, SIGCONT) }

    /// Starts a stopped node again from its config file (a cluster node keeps its nodes.conf).
    public func restart(_ port: Int) throws {
        _ = try Self.shell("redis-server \"$1\" >/dev/null 2>&1 && wait_for redis-cli -p \"$2\" ping",
                           "\(directory)/\(port)/redis.conf", String(port))
    }

    private func signal(_ port: Int, _ signal: Int32) {
        guard let text = try? TestFile.text("\(directory)/\(port)/redis.pid"),
              let pid = Int32(text.trimmingCharacters(in: .whitespacesAndNewlines)) else { return }
        Foundation.kill(pid, signal)
    }
}

/// A private 3-primary/3-replica Redis Cluster on loopback.
public final class RedisCluster: RedisProcessGroup, @unchecked Sendable {
    /// Starts one; `nodeTimeout` (ms) sets how fast a dead primary is replaced.
    public static func start(nodeTimeout: Int = 1000) async throws -> RedisCluster {
        let directory = makeDirectory("agcluster")
        _ = try await detachedShell("start_redis_cluster \"$1\" \"$2\"", directory, String(nodeTimeout))
        return RedisCluster(directory: directory, ports: try readPorts(directory + "/ports"))
    }

    /// `redis-cluster://` with the first three nodes as seeds.
    public var url: RedisURL {
        RedisURL(topology: .cluster(seeds: ports.prefix(3).map { .tcp(host: "127.0.0.1", port: $0) }))
    }

    /// Runs `body` against the cluster named by `AG_TEST_REDIS_CLUSTER_URL` (started by
    /// scripts/test), or a private one. Tests must use unique keys and leave the topology alone.
    public static func withShared<R>(_ body: (RedisURL) async throws -> R) async throws -> R {
        if let text = ProcessInfo.processInfo.environment["AG_TEST_REDIS_CLUSTER_URL"], !text.isEmpty {
            return try await body(try RedisURL(parsing: text))
        }
        let cluster = try await start(nodeTimeout: 5000)
        return try await body(cluster.url)
    }

    /// Ports of the current primaries, from `CLUSTER NODES` as a live node sees it.
    public func primaries() throws -> [Int] {
        try nodes().filter { $0.flags.contains("master") && !$0.flags.contains("fail") }.map(\.port)
    }

    /// The primary serving `slot`.
    public func owner(of slot: Int) throws -> Int? {
        try nodes().first { $0.flags.contains("master") && !$0.flags.contains("fail") && $0.slots.contains { $0.contains(slot) } }?.port
    }

    /// The replica port of the primary on `port`.
    public func replica(of port: Int) throws -> Int? {
        let all = try nodes()
        guard let primary = all.first(where: { $0.port == port }) else { return nil }
        return all.first { $0.primaryID == primary.id && !$0.flags.contains("fail") }?.port
    }

    /// Node ids by port.
    public func id(of port: Int) throws -> String? {
        try nodes().first { $0.port == port }?.id
    }

    /// `(id, port, flags, primary id, slot ranges)` of every node, as the first answering node reports it.
    public func nodes() throws -> [(id: String, port: Int, flags: String, primaryID: String, slots: [ClosedRange<Int>])] {
        var lastError: any Error = RedisServerError.couldNotStart("no node answered")
        for port in ports {
            do {
                let text = try cli(port, "cluster", "nodes")
                guard !text.isEmpty else { continue }
                return text.split(separator: "\n").map { line in
                    let fields = line.split(separator: " ")
                    let address = fields[1].split(separator: "@")[0]
                    let nodePort = Int(address.split(separator: ":").last ?? "") ?? 0
                    let ranges: [ClosedRange<Int>] = fields.dropFirst(8).compactMap { field in
                        guard !field.hasPrefix("[") else { return nil }
                        let bounds = field.split(separator: "-").compactMap { Int($0) }
                        return bounds.count == 2 ? bounds[0]...bounds[1] : bounds.first.map { $0...$0 }
                    }
                    return (String(fields[0]), nodePort, String(fields[2]), String(fields[3]), ranges)
                }
            } catch {
                lastError = error
            }
        }
        throw lastError
    }
}

/// A private Sentinel set: a primary, two replicas, three sentinels; master name `agmaster`.
public final class RedisSentinelSet: RedisProcessGroup, @unchecked Sendable {
    public let sentinels: [Int]

    init(directory: String, ports: [Int], sentinels: [Int]) {
        self.sentinels = sentinels
        super.init(directory: directory, ports: ports)
    }

    public static func start() async throws -> RedisSentinelSet {
        let directory = makeDirectory("agsentinel")
        _ = try await detachedShell("start_redis_sentinels \"$1\"", directory)
        return RedisSentinelSet(directory: directory, ports: try readPorts(directory + "/ports"),
                                sentinels: try readPorts(directory + "/sentinels"))
    }

    public var url: RedisURL {
        RedisURL(topology: .sentinel(sentinels: sentinels.map { .tcp(host: "127.0.0.1", port: $0) }, masterName: "agmaster"))
    }

    /// Runs `body` against the set named by `AG_TEST_REDIS_SENTINEL_URL`, or a private one.
    public static func withShared<R>(_ body: (RedisURL) async throws -> R) async throws -> R {
        if let text = ProcessInfo.processInfo.environment["AG_TEST_REDIS_SENTINEL_URL"], !text.isEmpty {
            return try await body(try RedisURL(parsing: text))
        }
        let set = try await start()
        return try await body(set.url)
    }

    /// The primary's port as the first answering sentinel reports it.
    public func masterPort() throws -> Int? {
        for sentinel in sentinels {
            let reply = try cli(sentinel, "sentinel", "get-master-addr-by-name", "agmaster").split(separator: "\n")
            if reply.count == 2, let port = Int(reply[1]) { return port }
        }
        return nil
    }
}
