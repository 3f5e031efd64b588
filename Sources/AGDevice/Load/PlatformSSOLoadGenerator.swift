import AGFormats
import AGHTTP
import Dispatch
import Foundation
import AGSync

/// Drives Platform SSO refreshes (server nonce + refresh request, the answer decrypted and
/// checked as a Mac checks it) as fast as a gateway answers, for benchmarks.
///
/// Registers `devices` simulated Macs through the admin API (register + first refresh token),
/// then runs `concurrency` threads for `duration`, each with one keep-alive connection and a
/// fixed share of the Macs, so a Mac's refresh token only ever moves forward on one thread.
/// The tenant's `attest` bucket and the per-IP `psso_nonce` bucket must allow the rate.
public struct PlatformSSOLoadGenerator: Sendable {
    public let configuration: MacConfiguration
    public let teamID: String
    public let bundleID: String
    public let devices: Int
    public let concurrency: Int
    public let duration: Duration

    public init(configuration: MacConfiguration, teamID: String, bundleID: String, devices: Int, concurrency: Int,
                duration: Duration) {
        self.configuration = configuration
        self.teamID = teamID
        self.bundleID = bundleID
        self.devices = max(1, devices)
        self.concurrency = max(1, min(concurrency, max(1, devices)))
        self.duration = duration
    }

    /// Registers the Macs, runs the load and returns the tallies (`progress` gets one line per phase).
    public func run(progress: (String) -> Void = { _ in }) throws(DeviceError) -> LoadReport {
        progress("registering \(devices) Macs for \(teamID).\(bundleID)")
        let gateway = BlockingHTTPClient(endpoint: configuration.session.gateway, timeout: configuration.session.timeout)
        let timeout = configuration.session.timeout
        let admin = configuration.session.admin.map { BlockingHTTPClient(endpoint: $0, timeout: timeout) }
        var macs: [SimulatedMac] = []
        var jwks: JSONValue?
        for index in 0..<devices {
            let session = MacSession(configuration: configuration,
                                     mac: try SimulatedMac(teamID: teamID, bundleID: bundleID, subject: "load-user-\(index)"),
                                     statePath: nil, gatewayClient: gateway, adminClient: admin)
            try session.register()
            if jwks == nil { jwks = try session.jwks() }
            macs.append(session.mac)
        }
        progress("running \(concurrency) threads for \(duration)")
        let shares = (0..<concurrency).map { thread in stride(from: thread, to: macs.count, by: concurrency).map { macs[$0] } }
        let tallies = Locked<[WorkerTally]>([])
        let group = DispatchGroup()
        let start = ContinuousClock.now
        let deadline = start.advanced(by: duration)
        let settings = configuration
        let keys = jwks
        for share in shares {
            group.enter()
            let thread = Thread {
                let tally = Self.work(macs: share, configuration: settings, jwks: keys, until: deadline)
                tallies.withLock { $0.append(tally) }
                group.leave()
            }
            thread.name = "attestgate-device psso load"
            thread.start()
        }
        group.wait()
        return LoadReport(devices: macs.count, concurrency: concurrency, elapsed: start.duration(to: .now),
                          tallies: tallies.withLock { $0 }, firstStep: "nonce")
    }

    /// One thread's loop: nonce + refresh on its Macs in turn until `deadline`.
    private static func work(macs: [SimulatedMac], configuration: MacConfiguration, jwks: JSONValue?,
                             until deadline: ContinuousClock.Instant) -> WorkerTally {
        let client = BlockingHTTPClient(endpoint: configuration.session.gateway, timeout: configuration.session.timeout)
        let sessions = macs.map { mac in
            let session = MacSession(configuration: configuration, mac: mac, statePath: nil, gatewayClient: client, adminClient: nil)
            session.jwksCache = jwks
            return session
        }
        var tally = WorkerTally()
        var next = 0
        while ContinuousClock.now < deadline {
            let session = sessions[next]
            next = (next + 1) % sessions.count
            let started = ContinuousClock.now
            do {
                let refresh = try session.refresh()
                let finished = ContinuousClock.now
                tally.challengeLatencies.append(refresh.nonceLatency)
                tally.refreshLatencies.append(started.duration(to: finished) - refresh.nonceLatency)
                tally.cycleLatencies.append(started.duration(to: finished))
                tally.refreshes += 1
            } catch {
                tally.errors[error.code, default: 0] += 1
                if case .transport = error { Thread.sleep(forTimeInterval: 0.01) }
            }
        }
        tally.connectionsOpened = client.connectionsOpened
        return tally
    }
}
