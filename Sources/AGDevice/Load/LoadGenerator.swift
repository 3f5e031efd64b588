import AGHTTP
import Foundation

/// Drives challenge + refresh cycles as fast as a gateway answers, for benchmarks.
///
/// Registers `devices` simulated devices through the admin API, then keeps `concurrency`
/// cycles in flight for `duration`, one per keep-alive connection, on `threads` threads that
/// each wait for whichever of their connections' answers comes first. Each connection owns a
/// fixed share of the devices (device `i` belongs to connection `i % concurrency`), so a
/// device's counter is only ever advanced by one connection and its assertions reach the
/// gateway in counter order. The tenant's `attest` and `challenge` buckets must allow the
/// rate, or most cycles end in `rate_limited`.
public struct LoadGenerator: Sendable {
    public let configuration: DeviceSessionConfiguration
    public let teamID: String
    public let bundleID: String
    public let devices: Int
    /// Connections, each with one cycle in flight.
    public let concurrency: Int
    /// Threads sharing the connections.
    public let threads: Int
    public let duration: Duration

    /// `concurrency` is capped at `devices` (a connection without a device has nothing to do),
    /// `threads` at `concurrency`; `threads` defaults to one per connection.
    public init(configuration: DeviceSessionConfiguration, teamID: String, bundleID: String,
                devices: Int, concurrency: Int, threads: Int? = nil, duration: Duration) {
        self.configuration = configuration
        self.teamID = teamID
        self.bundleID = bundleID
        self.devices = max(1, devices)
        self.concurrency = max(1, min(concurrency, max(1, devices)))
        self.threads = max(1, min(threads ?? concurrency, self.concurrency))
        self.duration = duration
    }

    /// Registers the devices, runs the load and returns the tallies. `progress` receives
    /// one line per phase.
    public func run(progress: (String) -> Void = { _ in }) throws(DeviceError) -> LoadReport {
        progress("registering \(devices) devices for \(teamID).\(bundleID)")
        let registered = try registerDevices()
        progress("running \(concurrency) connections on \(threads) threads for \(duration)")
        let configuration = configuration
        let runner = LoadRunner(gateway: configuration.gateway, timeout: configuration.timeout, concurrency: concurrency,
                                threads: threads, duration: duration)
        return runner.run(registered, firstStep: "challenge") { device, client in
            DeviceSession(configuration: configuration, device: device, statePath: nil, gatewayClient: client, adminClient: nil)
        }
    }

    private func registerDevices() throws(DeviceError) -> [SimulatedDevice] {
        // All registrations share one admin connection.
        let gateway = BlockingHTTPClient(endpoint: configuration.gateway, timeout: configuration.timeout)
        let admin = configuration.admin.map { BlockingHTTPClient(endpoint: $0, timeout: configuration.timeout) }
        var registered = [SimulatedDevice]()
        registered.reserveCapacity(devices)
        for _ in 0..<devices {
            let session = DeviceSession(configuration: configuration,
                                        device: try SimulatedDevice(teamID: teamID, bundleID: bundleID),
                                        statePath: nil, gatewayClient: gateway, adminClient: admin)
            try session.register()
            registered.append(session.device)
        }
        return registered
    }
}

/// A device's load cycle: a challenge, then a refresh over it.
extension DeviceSession: LoadCycle {
    func startCycle() -> (SessionRequest, SessionRequest) {
        (challengeRequest, challengeRequest)
    }

    func continueCycle(_ sent: SessionRequest, answer: HTTPClientResponse) throws(DeviceError) -> (SessionRequest, SessionRequest) {
        let refresh = try refreshRequest(with: Self.challenge(answering: Self.checked(answer, answering: sent)))
        return (refresh, refresh)
    }

    func finishCycle(_ sent: SessionRequest, answer: HTTPClientResponse) throws(DeviceError) {
        try acceptRefresh(Self.checked(answer, answering: sent))
    }
}

/// Latency percentiles of one kind of request (nearest-rank).
public struct LatencySummary: Sendable, Equatable {
    public let count: Int
    public let p50: Duration
    public let p99: Duration
    public let max: Duration

    public init(_ samples: [Duration]) {
        let sorted = samples.sorted()
        count = sorted.count
        func percentile(_ fraction: Double) -> Duration {
            guard !sorted.isEmpty else { return .zero }
            let rank = Int((fraction * Double(sorted.count)).rounded(.up))
            return sorted[Swift.max(0, Swift.min(sorted.count - 1, rank - 1))]
        }
        p50 = percentile(0.50)
        p99 = percentile(0.99)
        max = sorted.last ?? .zero
    }
}

/// The outcome of a load run.
public struct LoadReport: Sendable, CustomStringConvertible {
    public let devices: Int
    /// Cycles in flight, one per connection.
    public let concurrency: Int
    /// Threads the connections shared.
    public let threads: Int
    public let elapsed: Duration
    /// Successful refreshes (each one challenge + one refresh).
    public let refreshes: Int
    /// Failed cycles by envelope code (or local error kind such as `connection_refused`).
    public let errors: [String: Int]
    public let challengeLatency: LatencySummary
    public let refreshLatency: LatencySummary
    /// Challenge + refresh, for successful cycles.
    public let cycleLatency: LatencySummary
    /// Connections opened; equal to `concurrency` when keep-alive held.
    public let connectionsOpened: Int
    /// What the first request of a cycle is called in the latency table (`challenge`, `nonce`).
    public let firstStep: String

    init(devices: Int, concurrency: Int, threads: Int, elapsed: Duration, tallies: [WorkerTally],
         firstStep: String = "challenge") {
        self.firstStep = firstStep
        self.devices = devices
        self.concurrency = concurrency
        self.threads = threads
        self.elapsed = elapsed
        refreshes = tallies.reduce(0) { $0 + $1.refreshes }
        errors = tallies.reduce(into: [:]) { merged, tally in merged.merge(tally.errors, uniquingKeysWith: +) }
        challengeLatency = LatencySummary(tallies.flatMap(\.challengeLatencies))
        refreshLatency = LatencySummary(tallies.flatMap(\.refreshLatencies))
        cycleLatency = LatencySummary(tallies.flatMap(\.cycleLatencies))
        connectionsOpened = tallies.reduce(0) { $0 + $1.connectionsOpened }
    }

    public var errorCount: Int { errors.values.reduce(0, +) }

    public var elapsedSeconds: Double {
        let (seconds, attoseconds) = elapsed.components
        return Double(seconds) + Double(attoseconds) / 1e18
    }

    /// Successful refreshes per second.
    public var refreshesPerSecond: Double { elapsedSeconds > 0 ? Double(refreshes) / elapsedSeconds : 0 }

    public var description: String {
        var lines = [
            "devices \(devices), in flight \(concurrency), threads \(threads), connections \(connectionsOpened), elapsed \(Self.seconds(elapsed))",
            "refreshes ok \(refreshes) (\(String(format: "%.1f", refreshesPerSecond))/s), errors \(errorCount)",
        ]
        for (code, count) in errors.sorted(by: { $0.value > $1.value || ($0.value == $1.value && $0.key < $1.key) }) {
            lines.append("  \(code): \(count)")
        }
        lines.append("latency      p50        p99        max        n")
        for (name, summary) in [(firstStep, challengeLatency), ("refresh", refreshLatency), ("cycle", cycleLatency)] {
            lines.append(name.padding(toLength: 13, withPad: " ", startingAt: 0)
                + [summary.p50, summary.p99, summary.max].map { Self.milliseconds($0).padding(toLength: 11, withPad: " ", startingAt: 0) }.joined()
                + "\(summary.count)")
        }
        return lines.joined(separator: "\n")
    }

    private static func milliseconds(_ duration: Duration) -> String {
        let (seconds, attoseconds) = duration.components
        return String(format: "%.2fms", Double(seconds) * 1000 + Double(attoseconds) / 1e15)
    }

    private static func seconds(_ duration: Duration) -> String {
        let (seconds, attoseconds) = duration.components
        return String(format: "%.2fs", Double(seconds) + Double(attoseconds) / 1e18)
    }
}
