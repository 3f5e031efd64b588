#if canImport(Glibc)
import Glibc
#endif
import AGHTTP
import AGSync
import Dispatch
import Foundation

/// What a load connection runs over and over: a cycle of two requests, the second built from
/// the answer to the first (challenge + refresh, nonce + refresh). Each step hands the next
/// what it must remember (the request it sent, a nonce's request id, the signed request).
protocol LoadCycle: AnyObject {
    associatedtype FirstStep
    associatedtype SecondStep
    /// The cycle's first request.
    func startCycle() -> (SessionRequest, FirstStep)
    /// Checks the first answer and builds the second request.
    func continueCycle(_ step: FirstStep, answer: HTTPClientResponse) throws(DeviceError) -> (SessionRequest, SecondStep)
    /// Checks the second answer.
    func finishCycle(_ step: SecondStep, answer: HTTPClientResponse) throws(DeviceError)
}

/// Runs load cycles for benchmarks: `concurrency` keep-alive connections, each with one cycle
/// in flight, on `threads` threads for `duration`. A thread waits for whichever of its
/// connections' answers comes first (as wrk does), so an answer that arrives while the thread
/// is busy wakes nobody; with one thread per connection every answer wakes its thread, which
/// on a shared machine charges the server for waking and being preempted by its load.
struct LoadRunner: Sendable {
    let gateway: HTTPEndpoint
    let timeout: Duration
    let concurrency: Int
    let threads: Int
    let duration: Duration

    /// Spreads `items` over the connections (item `i` to connection `i % concurrency`, so an
    /// item's cycles never overlap) and the connections over the threads, makes each item's
    /// cycle on its thread with the connection's client, and runs until `duration` has passed;
    /// a cycle started before then is finished.
    func run<Item: Sendable, Cycle: LoadCycle>(
        _ items: [Item], firstStep: String, make: @escaping @Sendable (Item, BlockingHTTPClient) -> Cycle
    ) -> LoadReport {
        let connections = (0..<concurrency).map { connection in
            stride(from: connection, to: items.count, by: concurrency).map { items[$0] }
        }
        let shares = (0..<threads).map { thread in
            stride(from: thread, to: connections.count, by: threads).map { connections[$0] }
        }
        let tallies = Locked<[WorkerTally]>([])
        let group = DispatchGroup()
        let start = ContinuousClock.now
        let deadline = start.advanced(by: duration)
        let gateway = gateway, timeout = timeout
        for share in shares {
            group.enter()
            let thread = Thread {
                let cycles = share.map { items in
                    let client = BlockingHTTPClient(endpoint: gateway, timeout: timeout)
                    return LoadConnection(client: client, cycles: items.map { make($0, client) })
                }
                let tally = Self.work(cycles, until: deadline)
                tallies.withLock { $0.append(tally) }
                group.leave()
            }
            thread.name = "attestgate-device load"
            thread.start()
        }
        group.wait()
        return LoadReport(devices: items.count, concurrency: concurrency, threads: threads, elapsed: start.duration(to: .now),
                          tallies: tallies.withLock { $0 }, firstStep: firstStep)
    }

    /// One thread's loop over its connections.
    private static func work<Cycle>(_ connections: [LoadConnection<Cycle>], until deadline: ContinuousClock.Instant) -> WorkerTally {
        var tally = WorkerTally()
        var waiting: [pollfd] = []
        var owners: [LoadConnection<Cycle>] = []
        while true {
            let now = ContinuousClock.now
            waiting.removeAll(keepingCapacity: true)
            owners.removeAll(keepingCapacity: true)
            var resting = false
            for connection in connections {
                if connection.isIdle && now < deadline && connection.mayStart(at: now) { connection.start(tally: &tally) }
                if let descriptor = connection.awaitedDescriptor {
                    waiting.append(pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0))
                    owners.append(connection)
                } else if now < deadline {
                    resting = true
                }
            }
            if waiting.isEmpty {
                guard resting else { break }
                Thread.sleep(forTimeInterval: 0.001)
                continue
            }
            // A connection resting after a transport error is looked at again soon after its rest.
            guard poll(&waiting, nfds_t(waiting.count), resting ? 1 : 1000) > 0 else { continue }
            for (entry, connection) in zip(waiting, owners) where entry.revents != 0 {
                connection.answer(tally: &tally, deadline: deadline)
            }
        }
        tally.connectionsOpened = connections.reduce(0) { $0 + $1.client.connectionsOpened }
        return tally
    }
}

/// One keep-alive connection of a load thread and the cycles (devices, Macs) that take turns
/// on it: sends a cycle's request and, when its answer is there, the next one.
private final class LoadConnection<Cycle: LoadCycle> {
    let client: BlockingHTTPClient
    private let cycles: [Cycle]
    private var next = 0
    private var step = Step.idle
    private var restingUntil: ContinuousClock.Instant?

    private enum Step {
        case idle
        case first(Cycle, Cycle.FirstStep, SessionRequest, started: ContinuousClock.Instant)
        case second(Cycle, Cycle.SecondStep, SessionRequest, started: ContinuousClock.Instant,
                    firstAnswered: ContinuousClock.Instant)
    }

    init(client: BlockingHTTPClient, cycles: [Cycle]) {
        self.client = client
        self.cycles = cycles
    }

    var isIdle: Bool {
        if case .idle = step { return true }
        return false
    }

    /// The socket to wait on while a request is out.
    var awaitedDescriptor: Int32? { isIdle ? nil : client.descriptor }

    func mayStart(at now: ContinuousClock.Instant) -> Bool {
        restingUntil.map { now >= $0 } ?? true
    }

    /// Sends the next cycle's first request.
    func start(tally: inout WorkerTally) {
        let cycle = cycles[next]
        next = (next + 1) % cycles.count
        restingUntil = nil
        let started = ContinuousClock.now
        let (request, state) = cycle.startCycle()
        do {
            try send(request)
            step = .first(cycle, state, request, started: started)
        } catch {
            fail(error, tally: &tally)
        }
    }

    /// Reads the awaited answer and sends the cycle's second request, or counts the cycle and
    /// starts the next one (before `deadline`).
    func answer(tally: inout WorkerTally, deadline: ContinuousClock.Instant) {
        do {
            switch step {
            case .idle:
                return
            case .first(let cycle, let state, let request, let started):
                let (second, secondState) = try cycle.continueCycle(state, answer: read(request))
                let firstAnswered = ContinuousClock.now
                tally.challengeLatencies.append(started.duration(to: firstAnswered))
                try send(second)
                step = .second(cycle, secondState, second, started: started, firstAnswered: firstAnswered)
            case .second(let cycle, let state, let request, let started, let firstAnswered):
                try cycle.finishCycle(state, answer: read(request))
                let finished = ContinuousClock.now
                tally.refreshLatencies.append(firstAnswered.duration(to: finished))
                tally.cycleLatencies.append(started.duration(to: finished))
                tally.refreshes += 1
                step = .idle
                if finished < deadline { start(tally: &tally) }
            }
        } catch {
            fail(error, tally: &tally)
        }
    }

    private func send(_ request: SessionRequest) throws(DeviceError) {
        do {
            try client.send(method: request.method, path: request.path, headers: request.headers, body: request.body)
        } catch {
            throw .transport(error)
        }
    }

    private func read(_ request: SessionRequest) throws(DeviceError) -> HTTPClientResponse {
        do {
            return try client.readResponse(method: request.method)
        } catch {
            throw .transport(error)
        }
    }

    private func fail(_ error: DeviceError, tally: inout WorkerTally) {
        tally.errors[error.code, default: 0] += 1
        step = .idle
        if case .transport = error {
            client.close()
            // A gateway that is down would otherwise be hammered in a tight loop.
            restingUntil = ContinuousClock.now.advanced(by: .milliseconds(10))
        }
    }
}

/// What one load thread counted.
struct WorkerTally: Sendable {
    var refreshes = 0
    var errors: [String: Int] = [:]
    /// The first step's latencies (challenge, nonce).
    var challengeLatencies: [Duration] = []
    var refreshLatencies: [Duration] = []
    var cycleLatencies: [Duration] = []
    var connectionsOpened = 0
}
