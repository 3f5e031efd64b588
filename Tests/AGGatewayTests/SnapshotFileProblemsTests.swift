import AGGateway
import AGTestSupport
import Foundation
import Testing

/// Files named by the configuration that only parse when a snapshot is built (token keys, App
/// Attest roots) are reported like every other problem: `gateway.yaml:line: key.path: what is
/// wrong`, naming the file — not the key file's own path without a line, nor OpenSSL's decoder
/// codes. (They were `<key file>: tokens.keys[0].file: not a ES256 private key in PEM:
/// P256.PrivateKey(pemRepresentation:): error:1E08010C:DECODER routines::unsupported …`.)
@Suite("problems in files the configuration names")
struct SnapshotFileProblemsTests {
    @Test func anUnparsableKeyOrRootCertificateNamesItsLineInGatewayYAML() throws {
        let config = try TestConfigDirectory(tenants: [:], gatewayYAML: "app_attest:\n  root_ca: root-ca.pem\n  test_ca: test-ca.pem\n",
                                             files: ["test-ca.pem": "-----BEGIN CERTIFICATE-----\nZ2FyYmFnZQ==\n-----END CERTIFICATE-----\n"])
        #expect(GatewaySnapshot.check(path: config.gatewayPath).count == 1, "only the garbage test CA")
        let keyFile = config.directory + "/keys/test-es256.pem"
        try "-----BEGIN PRIVATE KEY-----\nZ2FyYmFnZQ==\n-----END PRIVATE KEY-----\n".write(toFile: keyFile, atomically: true, encoding: .utf8)
        let lines = try TestFile.text(config.gatewayPath).split(separator: "\n", omittingEmptySubsequences: false)
        let keyLine = try #require(lines.firstIndex { $0.contains("file: keys/test-es256.pem") }) + 1
        let testCALine = try #require(lines.firstIndex { $0.contains("test_ca: test-ca.pem") }) + 1
        let problems = GatewaySnapshot.check(path: config.gatewayPath)
        #expect(problems.contains("\(config.gatewayPath):\(keyLine): tokens.keys[0].file: key file \"\(keyFile)\": not a PEM private key for ES256"),
                "\(problems)")
        #expect(problems.contains("\(config.gatewayPath):\(testCALine): app_attest.test_ca: certificate file \"\(config.directory)/test-ca.pem\": not a PEM certificate"),
                "\(problems)")
        #expect(problems.count == 2)
        #expect(!problems.joined().contains("DECODER"))
    }
}
