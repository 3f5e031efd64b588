import Dispatch
import AGHTTP
import Foundation
import AGSync

/// Drives challenge + refresh cycles as fast as a gateway answers, for benchmarks.
///
/// Registers `devices` simulated devices through the admin API, then runs `concurrency`
/// threads for `duration`. Each thread owns one keep-alive connection and a fixed share of the
/// devices (device `i` belongs to thread `i % concurrency`), so a device's counter is only
/// ever advanced by one thread and its assertions reach the gateway in counter order.
/// The tenant's `attest` and `challenge` buckets must allow the rate, or most cycles end in
/// `rate_limited`.
public struct LoadGenerator: Sendable {
    public let configuration: DeviceSessionConfiguration
    public let teamID: String
    public let bundleID: String
    public let devices: Int
    public let concurrency: Int
    public let duration: Duration

    /// `concurrency` is capped at `devices`: a thread without a device has nothing to do.
    public init(configuration: DeviceSessionConfiguration, teamID: String, bundleID: String,
                devices: Int, concurrency: Int, duration: Duration) {
        self.configuration = configuration
        self.teamID = teamID
        self.bundleID = bundleID
        self.devices = max(1, devices)
        self.concurrency = max(1, min(concurrency, max(1, devices)))
        self.duration = duration
    }

    /// Registers the devices, runs the load and returns the tallies. `progress` receives
    /// one line per phase.
    public func run(progress: (String) -> Void = { _ in }) throws(DeviceError) -> LoadReport {
        progress("registering \(devices) devices for \(teamID).\(bundleID)")
        let registered = try registerDevices()
        progress("running \(concurrency) threads for \(duration)")

        let shares = (0..<concurrency).map { thread in
            stride(from: thread, to: registered.count, by: concurrency).map { registered[$0] }
        }
        let tallies = Locked<[WorkerTally]>([])
        let group = DispatchGroup()
        let start = ContinuousClock.now
        let deadline = start.advanced(by: duration)
        let configuration = configuration
        for share in shares {
            group.enter()
            let thread = Thread {
                let tally = Self.work(devices: share, configuration: configuration, until: deadline)
                tallies.withLock { $0.append(tally) }
                group.leave()
            }
            thread.name = "attestgate-device load"
            thread.start()
        }
        group.wait()
        let elapsed = start.duration(to: .now)
        return LoadReport(devices: registered.count, concurrency: concurrency, elapsed: elapsed,
                          tallies: tallies.withLock { $0 })
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

    /// One thread's loop: challenge + refresh on its devices in turn until `deadline`.
    private static func work(devices: [SimulatedDevice], configuration: DeviceSessionConfiguration,
                             until deadline: ContinuousClock.Instant) -> WorkerTally {
        let client = BlockingHTTPClient(endpoint: configuration.gateway, timeout: configuration.timeout)
        let sessions = devices.map {
            DeviceSession(configuration: configuration, device: $0, statePath: nil, gatewayClient: client, adminClient: nil)
        }
        var tally = WorkerTally()
        var next = 0
        while ContinuousClock.now < deadline {
            let session = sessions[next]
            next = (next + 1) % sessions.count
            let started = ContinuousClock.now
            do {
                let challenge = try session.challenge()
                let challenged = ContinuousClock.now
                tally.challengeLatencies.append(started.duration(to: challenged))
                try session.refresh(with: challenge)
                let refreshed = ContinuousClock.now
                tally.refreshLatencies.append(challenged.duration(to: refreshed))
                tally.cycleLatencies.append(started.duration(to: refreshed))
                tally.refreshes += 1
            } catch {
                tally.errors[error.code, default: 0] += 1
                // A gateway that is down would otherwise be hammered in a tight loop.
                if case .transport = error { Thread.sleep(forTimeInterval: 0.01) }
            }
        }
        tally.connectionsOpened = client.connectionsOpened
        return tally
    }
}

/// What one load thread counted.
struct WorkerTally: Sendable {
    var refreshes = 0
    var errors: [String: Int] = [:]
    var challengeLatencies: [Duration] = []
    var refreshLatencies: [Duration] = []
    var cycleLatencies: [Duration] = []
    var connectionsOpened = 0
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
    public let concurrency: Int
    public let elapsed: Duration
    /// Successful refreshes (each one challenge + one refresh).
    public let refreshes: Int
    /// Failed cycles by envelope code (or local error kind such as `connection_refused`).
    public let errors: [String: Int]
    public let challengeLatency: LatencySummary
    public let refreshLatency: LatencySummary
    /// Challenge + refresh, for successful cycles.
    public let cycleLatency: LatencySummary
    /// Connections opened by the load threads; equal to `concurrency` when keep-alive held.
    public let connectionsOpened: Int
    /// What the first request of a cycle is called in the latency table (`challenge`, `nonce`).
    public let firstStep: String

    init(devices: Int, concurrency: Int, elapsed: Duration, tallies: [WorkerTally], firstStep: String = "challenge") {
        self.firstStep = firstStep
        self.devices = devices
        self.concurrency = concurrency
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
            "devices \(devices), threads \(concurrency), connections \(connectionsOpened), elapsed \(Self.seconds(elapsed))",
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
