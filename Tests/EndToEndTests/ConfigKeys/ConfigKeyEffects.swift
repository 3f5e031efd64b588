import AGTestSupport
import Foundation
import AGSync
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Every documented configuration key with how its effect is observed on a running gateway,
/// or how it is refused (issue 9 item 1: a key that is accepted must have its effect).
enum ConfigKeyEffects {
    static var all: [KeyEffect] { server + store + tokens + limits + trust + logging + tenant + platformSSO + hardening + upstreamReach }

    /// A port to configure a listener on: one that binds now, picked below the kernel's
    /// ephemeral range (32768–60999 here), so no other test's port-0 listener and no outgoing
    /// connection can be handed it before the gateway binds it. (A port-0 pick once went to
    /// another listener in between, under a sanitizer's slow whole run: the probe's request
    /// reached that listener and was closed unanswered.)
    static func freePort() throws -> Int {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<100 {
            let port = Int.random(in: 20_000..<32_000, using: &generator)
            let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            defer { close(descriptor) }
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = UInt16(port).bigEndian
            address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
            let bound = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
            }
            if bound { return port }
        }
        throw POSIXError(.EADDRINUSE)
    }

    /// The gateway's startup refuses the configuration with `message` at `file:line`.
    static func expectRefused(gateway: String = "", tenantExtra: String = "", message: String) throws {
        do {
            _ = try KeyProbe(gatewayYAML: gateway, tenantExtra: tenantExtra)
            Issue.record("accepted; expected a refusal saying \(message)")
        } catch {
            let text = "\(error)"
            #expect(text.contains(message), "\(text)")
            #expect(text.range(of: #"\.yaml:\d+: "#, options: .regularExpression) != nil, "no file:line in \(text)")
        }
    }

    /// The real binary serving a probe's configuration directory with `gateway` sections (for
    /// what an in-process gateway cannot show: threads, its own logger). Keep the result alive
    /// while using the process: it owns the directory.
    static func process(gateway: String) throws -> (probe: KeyProbe, process: GatewayProcess) {
        let probe = try KeyProbe(gatewayYAML: gateway)
        probe.gateway.stop()
        return (probe, try GatewayProcess(configPath: probe.gateway.directory + "/gateway.yaml"))
    }

    /// Runs the delegated check `name` once for every key observed through it: the first key
    /// to need it runs it (its expectations are recorded against that key's case), later keys
    /// get the same outcome, a throw included, instead of running it again.
    static func shared(_ name: String, _ body: () async throws -> Void) async throws {
        if let known = sharedOutcomes.withLock({ $0[name] }) { return try known.get() }
        let outcome: Result<Void, any Error>
        do {
            try await body()
            outcome = .success(())
        } catch {
            outcome = .failure(error)
        }
        sharedOutcomes.withLock { $0[name] = outcome }
        try outcome.get()
    }

    private static let sharedOutcomes = Locked<[String: Result<Void, any Error>]>([:])
}
