import AGFormats
import AGHTTP

/// Drives Platform SSO refreshes (server nonce + refresh request, the answer decrypted and
/// checked as a Mac checks it) as fast as a gateway answers, for benchmarks.
///
/// Registers `devices` simulated Macs through the admin API (register + first refresh token),
/// then keeps `concurrency` refreshes in flight for `duration` on `threads` threads, as
/// `LoadGenerator` does; each connection has a fixed share of the Macs, so a Mac's refresh
/// token only ever moves forward on one connection. The tenant's `attest` bucket and the
/// per-IP `psso_nonce` bucket must allow the rate.
public struct PlatformSSOLoadGenerator: Sendable {
    public let configuration: MacConfiguration
    public let teamID: String
    public let bundleID: String
    public let devices: Int
    /// Connections, each with one refresh in flight.
    public let concurrency: Int
    /// Threads sharing the connections.
    public let threads: Int
    public let duration: Duration

    /// `concurrency` is capped at `devices`, `threads` at `concurrency`; `threads` defaults to
    /// one per connection.
    public init(configuration: MacConfiguration, teamID: String, bundleID: String, devices: Int, concurrency: Int,
                threads: Int? = nil, duration: Duration) {
        self.configuration = configuration
        self.teamID = teamID
        self.bundleID = bundleID
        self.devices = max(1, devices)
        self.concurrency = max(1, min(concurrency, max(1, devices)))
        self.threads = max(1, min(threads ?? concurrency, self.concurrency))
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
        progress("running \(concurrency) connections on \(threads) threads for \(duration)")
        let settings = configuration
        let keys = jwks
        let runner = LoadRunner(gateway: settings.session.gateway, timeout: timeout, concurrency: concurrency,
                                threads: threads, duration: duration)
        return runner.run(macs, firstStep: "nonce") { mac, client in
            let session = MacSession(configuration: settings, mac: mac, statePath: nil, gatewayClient: client, adminClient: nil)
            session.jwksCache = keys
            return session
        }
    }
}

/// A Mac's load cycle: a server nonce, then a refresh request over it, its answer decrypted
/// and checked.
extension MacSession: LoadCycle {
    /// The nonce request as sent and its `client-request-id`, which the refresh request repeats.
    struct NonceStep {
        let request: SessionRequest
        let clientRequestID: String
    }

    func startCycle() -> (SessionRequest, NonceStep) {
        let clientRequestID = MacRefreshRequest.newNonce()
        let request = nonceRequest(clientRequestID: clientRequestID)
        return (request, NonceStep(request: request, clientRequestID: clientRequestID))
    }

    func continueCycle(_ step: NonceStep, answer: HTTPClientResponse) throws(DeviceError) -> (SessionRequest, PendingRefresh) {
        let pending = try refreshRequest(clientRequestID: step.clientRequestID,
                                         serverNonce: Self.nonce(answering: answer, to: step.request))
        return (pending.request, pending)
    }

    func finishCycle(_ pending: PendingRefresh, answer: HTTPClientResponse) throws(DeviceError) {
        try acceptRefresh(answer, pending)
    }
}
