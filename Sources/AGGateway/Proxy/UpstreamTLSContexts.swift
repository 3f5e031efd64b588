import AGConfig
import AGCrypto

/// The TLS client contexts of one snapshot's https upstreams, built while the snapshot is: one
/// for the system store (shared by every tenant without `upstream_ca`) and one per CA file.
/// Not shared beyond the build; the contexts themselves are, by the tenants' targets.
final class UpstreamTLSContexts {
    private var system: TLSClientContext?
    private var byFile: [String: TLSClientContext] = [:]

    /// The context for an https upstream trusting `ca`, or the system store when nil; a CA
    /// file without a PEM certificate is reported at its `upstream_ca` key, a system store that
    /// cannot be loaded against `tenantFile`.
    func context(for ca: UpstreamCAFile?, tenantFile: String) throws(ConfigError) -> TLSClientContext {
        guard let ca else {
            if let system { return system }
            do {
                let made = try TLSClientContext()
                system = made
                return made
            } catch {
                throw ConfigError(problems: [ConfigProblem(file: tenantFile, line: nil, keyPath: "upstream",
                                                           message: "cannot load the system certificate store: \(error.reason)")])
            }
        }
        if let known = byFile[ca.path] { return known }
        do {
            let made = try TLSClientContext(trustedCertificatesFile: ca.path)
            byFile[ca.path] = made
            return made
        } catch {
            throw ConfigError(problems: [ca.location.problem("CA file \"\(ca.path)\": \(error.reason)")])
        }
    }
}
