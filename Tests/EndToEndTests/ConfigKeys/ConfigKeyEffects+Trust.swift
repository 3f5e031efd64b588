import AGDevTools
import AGDevice
import AGFormats
import AGTestSupport
import Foundation
import Testing

/// `app_attest.*`, `tenants_dir`, `log.*`.
extension ConfigKeyEffects {
    /// A device of `probe` attesting with a certificate from `ca`: the validate status and code.
    static func attest(_ probe: KeyProbe, ca: TestCertificateAuthority,
                       environment: SimulatedAttestationEnvironment = .development) throws -> (status: Int, code: String?) {
        let session = try probe.device()
        do {
            _ = try session.attest(testCA: ca, environment: environment)
            return (200, nil)
        } catch DeviceError.rejected(let rejection) {
            return (rejection.status, rejection.code)
        }
    }

    static func caFiles(_ ca: TestCertificateAuthority) throws -> [String: String] {
        ["probe-ca.pem": ca.certificate.pemRepresentation]
    }

    static let trust: [KeyEffect] = [
        KeyEffect(key: "gateway:app_attest.root_ca", observed: "an attestation chained to the configured root validates") {
            let ca = try TestCertificateAuthority.generate()
            let probe = try KeyProbe(gatewayYAML: "app_attest:\n  root_ca: probe-ca.pem\n", files: try caFiles(ca))
            #expect(try attest(probe, ca: ca).status == 200)
            let other = try KeyProbe()
            let refused = try attest(other, ca: ca)
            #expect(refused.status == 401, "Apple's root does not trust the test CA")
            #expect(refused.code == "apple_validation_failed")
        },
        KeyEffect(key: "gateway:app_attest.test_ca", observed: "an attestation by the test CA validates, and the log says TEST CA TRUSTED") {
            let ca = try TestCertificateAuthority.generate()
            let probe = try KeyProbe(gatewayYAML: "app_attest:\n  root_ca: root-ca.pem\n  test_ca: probe-ca.pem\n", files: try caFiles(ca))
            #expect(try attest(probe, ca: ca).status == 200)
            #expect(!probe.logLines("TEST CA TRUSTED").isEmpty)
        },
        KeyEffect(key: "gateway:app_attest.allow_test_ca", observed: "a production tenant beside a test CA is refused, unless allowed") {
            let ca = try TestCertificateAuthority.generate()
            let section = "app_attest:\n  root_ca: root-ca.pem\n  test_ca: probe-ca.pem\n"
            do {
                _ = try KeyProbe(gatewayYAML: section, environment: "production", files: try caFiles(ca))
                Issue.record("a production tenant was accepted beside a test CA")
            } catch {
                #expect("\(error)".contains("allow_test_ca"), "\(error)")
            }
            let allowed = try KeyProbe(gatewayYAML: section + "  allow_test_ca: true\n", environment: "production", files: try caFiles(ca))
            #expect(try attest(allowed, ca: ca, environment: .production).status == 200)
        },
        KeyEffect(key: "gateway:tenants_dir", observed: "tenants are read from the configured directory") {
            let probe = try KeyProbe(gatewayYAML: "tenants_dir: keys\n", tenantsDirectory: "keys")
            #expect(try probe.challenge().status == 200)
        },
    ]

    static let logging: [KeyEffect] = [
        KeyEffect(key: "gateway:log.format", observed: "the real binary writes text lines") {
            let (probe, process) = try ConfigKeyEffects.process(gateway: "log:\n  format: text\n  level: info\n")
            defer { withExtendedLifetime(probe) {} }
            let serving = process.log.split(separator: "\n").first { $0.contains("attestgate serving") }
            #expect(serving?.contains(" INFO attestgate serving listen=") == true, "\(process.log)")
            #expect(serving?.hasPrefix("{") == false)
        },
        KeyEffect(key: "gateway:log.level", observed: "the real binary logs a revocation's debug line at debug, not at info") {
            for (level, written) in [("debug", true), ("info", false)] {
                let admin = try freePort()
                let (probe, process) = try ConfigKeyEffects.process(
                    gateway: "log:\n  level: \(level)\nadmin:\n  listen: \"127.0.0.1:\(admin)\"\n  token_file: admin-token\n")
                defer { withExtendedLifetime(probe) {} }
                let device = try SimulatedDevice(teamID: probe.teamID, bundleID: probe.bundleID)
                let path = "/admin/v1/tenants/\(probe.appID)/keys/\(device.keyIDForPath)"
                let auth = [("Authorization", "Bearer \(probe.gateway.adminToken)")]
                #expect(try HTTPTestClient.send(port: admin, "PUT", path, headers: auth,
                                                json: #"{"publicKey":"\#(Base64.encode(device.publicKeyX963))","counter":0}"#).status == 200)
                #expect(try HTTPTestClient.send(port: admin, "POST", path + "/revoke", headers: auth).status == 200)
                // A line the instance writes in either case comes after the revocation's.
                #expect(try HTTPTestClient.send(port: admin, "POST", "/admin/v1/reload", headers: auth).status == 200)
                #expect(eventually { process.log.contains("configuration reloaded") })
                #expect(eventually(written ? 5 : 0.5) { process.log.contains("revocation received") } == written, "level \(level)")
            }
        },
        KeyEffect(key: "gateway:log.access_log", observed: "false: requests write no access line") {
            let probe = try KeyProbe(gatewayYAML: "log:\n  level: debug\n  access_log: false\n")
            #expect(try probe.gateway.send("GET", "/healthz").status == 200)
            let on = try KeyProbe()
            #expect(try on.gateway.send("GET", "/healthz").status == 200)
            #expect(eventually { on.gateway.accessLogText().contains("\"route\":\"healthz\"") })
            #expect(!probe.gateway.accessLogText().contains("\"route\":\"healthz\""))
        },
    ]
}
