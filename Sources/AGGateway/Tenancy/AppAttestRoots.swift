import AGConfig
import AGCrypto
import Foundation

/// The certificates App Attest attestations must chain to, parsed once per snapshot: Apple's
/// App Attestation Root CA (`app_attest.root_ca`) and, when configured, a test CA
/// (`app_attest.test_ca`) for the iOS Simulator and CI.
final class AppAttestRoots: Sendable {
    let trusted: [X509Certificate]
    /// Whether a test CA is among the trusted roots (logged loudly at startup and reload).
    let trustsTestCA: Bool

    init(_ config: AppAttestConfig) throws(ConfigError) {
        var problems: [ConfigProblem] = []
        var trusted: [X509Certificate] = []
        let files: [(String?, ConfigLocation?)] = [(config.rootCAFile, config.rootCALocation), (config.testCAFile, config.testCALocation)]
        for case let (file?, location?) in files {
            guard let data = FileManager.default.contents(atPath: file) else {
                problems.append(location.problem("certificate file \"\(file)\" cannot be read"))
                continue
            }
            do {
                trusted.append(try X509Certificate(pemRepresentation: String(decoding: data, as: UTF8.self)))
            } catch {
                problems.append(location.problem("certificate file \"\(file)\": not a PEM certificate"))
            }
        }
        guard problems.isEmpty else { throw ConfigError(problems: problems) }
        self.trusted = trusted
        self.trustsTestCA = config.testCAFile != nil
    }
}
