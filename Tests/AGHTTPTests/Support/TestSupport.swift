#if canImport(Glibc)
import Glibc
#endif
import Foundation
import AGSync
import Synchronization
import AGEventLoop
import AGTestSupport
@testable import AGHTTP

/// A mutable box for handing values across threads in tests; every use is sequenced by a
/// semaphore or happens on one event loop thread.
final class UncheckedBox<T>: @unchecked Sendable {
    var value: T
    init(_ value: T) { self.value = value }
}

/// An event loop running on its own thread.
final class LoopThread: @unchecked Sendable {
    // Invariant: `loop` is only driven by the thread started here; the test thread only hands
    // it work through `execute`, which is thread-safe.
    let loop = EventLoop()
    private let finished = DispatchSemaphore(value: 0)

    init() {
        _ = LoopThread.ignoreSIGPIPE
        let loop = self.loop
        let finished = self.finished
        let thread = Thread { loop.run(); finished.signal() }
        thread.start()
    }

    /// Writes to a peer that has gone must fail with EPIPE, not kill the test process.
    private static let ignoreSIGPIPE: Void = { signal(SIGPIPE, SIG_IGN) }()

    /// Runs `body` on the loop thread and waits for its result.
    func sync<T>(_ body: @escaping () -> T) -> T {
        let work = UncheckedBox(body)
        let result = UncheckedBox<T?>(nil)
        let done = DispatchSemaphore(value: 0)
        loop.execute {
            result.value = work.value()
            done.signal()
        }
        done.wait()
        return result.value!
    }

    func stop() {
        loop.stop()
        finished.wait()
    }
}

/// The process's resident set size in bytes, from /proc/self/status; under a sanitizer the
/// live heap bytes instead (`TestBuild.liveHeapBytes`: the quarantine is resident, not live).
func residentBytes() -> Int {
    if let live = TestBuild.liveHeapBytes() { return live }
    guard let status = try? TestFile.text("/proc/self/status") else { return 0 }
    for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
        let digits = line.filter(\.isNumber)
        return (Int(digits) ?? 0) * 1024
    }
    return 0
}

/// A deterministic byte stream: byte `i` is `table[i % table.count]`, with a prime-length table
/// so that a lost, repeated or shifted piece shows up. Generation and checks use memcpy/memcmp.
enum TestPattern {
    static let table: [UInt8] = {
        var state: UInt32 = 0x2545F491
        return (0..<65521).map { _ in
            state = state &* 1_664_525 &+ 1_013_904_223
            return UInt8(truncatingIfNeeded: state >> 24)
        }
    }()

    /// Fills `buffer` with the stream's bytes starting at `offset`.
    static func fill(_ buffer: UnsafeMutableRawBufferPointer, offset: Int) {
        table.withUnsafeBytes { table in
            var written = 0
            var position = offset % table.count
            while written < buffer.count {
                let n = min(buffer.count - written, table.count - position)
                (buffer.baseAddress! + written).copyMemory(from: table.baseAddress! + position, byteCount: n)
                written += n
                position = 0
            }
        }
    }

    static func bytes(count: Int, offset: Int = 0) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        bytes.withUnsafeMutableBytes { fill($0, offset: offset) }
        return bytes
    }
}

/// Checks that received pieces continue the pattern; counts them.
struct PatternChecker {
    private(set) var count = 0
    private(set) var intact = true

    mutating func consume(_ piece: UnsafeRawBufferPointer) {
        TestPattern.table.withUnsafeBytes { table in
            var checked = 0
            var position = count % table.count
            while checked < piece.count {
                let n = min(piece.count - checked, table.count - position)
                if memcmp(piece.baseAddress! + checked, table.baseAddress! + position, n) != 0 { intact = false }
                checked += n
                position = 0
            }
        }
        count += piece.count
    }
}

/// A blocking upstream on raw sockets, one thread per connection, scripted per test: for
/// upstreams that misbehave on purpose or stream huge bodies with plain blocking writes.
final class ScriptedUpstream: @unchecked Sendable {
    // Invariant: `listener` is written once in init; the connection list is mutex-guarded.
    let port: Int
    private let listener: Int32
    private let connections = Locked<[Int32]>([])
    private let acceptedCount = Atomic<Int>(0)
    private let finished = DispatchSemaphore(value: 0)

    /// Connections accepted so far.
    var accepted: Int { acceptedCount.load(ordering: .acquiring) }

    /// `script` runs on its own thread for each accepted connection, with its index (0, 1, …).
    init(_ script: @escaping @Sendable (BlockingSocket, Int) -> Void) throws {
        let socket = try ListeningSocket.bind(host: "127.0.0.1", port: 0)
        port = socket.port
        listener = socket.fileDescriptor
        // ListeningSocket makes the socket non-blocking for libevent; accept here blocks.
        _ = fcntl(listener, F_SETFL, fcntl(listener, F_GETFL) & ~O_NONBLOCK)
        let listener = self.listener
        let thread = Thread { [self] in
            while true {
                let fd = Glibc.accept(listener, nil, nil)
                if fd < 0 {
                    if errno == EINTR { continue }
                    break
                }
                let index = acceptedCount.wrappingAdd(1, ordering: .acquiringAndReleasing).oldValue
                connections.withLock { $0.append(fd) }
                let worker = Thread {
                    let connection = BlockingSocket(fd: fd)
                    script(connection, index)
                    self.connections.withLock { $0.removeAll { $0 == fd } }
                    connection.close()
                }
                worker.start()
            }
            finished.signal()
        }
        thread.start()
    }

    func stop() {
        shutdown(listener, Int32(SHUT_RDWR))
        finished.wait()
        Glibc.close(listener)
        connections.withLock { fds in
            for fd in fds { shutdown(fd, Int32(SHUT_RDWR)) }
        }
    }

    /// Reads one request (head and body) and returns its head; nil when the peer closed.
    static func readRequest(_ connection: BlockingSocket, checker: UnsafeMutablePointer<PatternChecker>? = nil) -> TestHead? {
        guard let head = connection.readHead() else { return nil }
        let ok = connection.readBody(.of(head.headers, defaultUntilClose: false)) { piece in
            checker?.pointee.consume(piece)
        }
        return ok ? head : nil
    }

    /// Answers every request on the connection with `200 ok` until the peer closes.
    static func keepAliveResponder(_ connection: BlockingSocket) {
        while readRequest(connection) != nil {
            guard connection.write("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok") else { return }
        }
    }
}
