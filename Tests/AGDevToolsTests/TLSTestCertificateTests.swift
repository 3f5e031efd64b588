import AGDevTools
import AGCrypto
import Foundation
import Testing

/// TLS server certificates from the test CA, and the TLS contexts that load them: a chain and
/// key are checked when a context is built, so a bad file is refused at load, never at the
/// first handshake.
@Suite struct TLSTestCertificateTests {
    static func directory() -> String {
        let path = NSTemporaryDirectory() + "agtlscert-" + UUID().uuidString
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    @Test func aServerCertificateCarriesItsNamesAndServerAuth() throws {
        let authority = try TestCertificateAuthority.generate(commonName: "attestgate Test TLS CA")
        let issued = try authority.issueTLSServerCertificate(dnsNames: ["localhost", "api.test"], ipAddresses: ["127.0.0.1", "::1"])
        // subjectAltName: dNSName [2] "localhost", "api.test"; iPAddress [7] 4 and 16 bytes.
        let expectedNames: [UInt8] = [0x30, 0x2D, 0x82, 0x09] + Array("localhost".utf8) + [0x82, 0x08] + Array("api.test".utf8)
            + [0x87, 0x04, 127, 0, 0, 1] + [0x87, 0x10] + [UInt8](repeating: 0, count: 15) + [1]
        #expect(try issued.certificate.extensionValue(oid: "2.5.29.17") == expectedNames)
        #expect(try issued.certificate.extensionValue(oid: "2.5.29.37") == [0x30, 0x0A, 0x06, 0x08, 0x2B, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x01])
        #expect(try issued.certificate.extensionValue(oid: "2.5.29.15") == [0x03, 0x02, 0x07, 0x80])
        try issued.certificate.verifyChain(intermediates: [], trustedRoots: [authority.certificate], at: Date())
        #expect(throws: CryptoError.self) { try authority.issueTLSServerCertificate(dnsNames: [], ipAddresses: ["300.1.1.1"]) }
        #expect(throws: CryptoError.self) { try authority.issueTLSServerCertificate(dnsNames: [], ipAddresses: []) }
    }

    @Test func aServerContextLoadsAGoodPairAndRefusesBadOnes() throws {
        let authority = try TestCertificateAuthority.generate()
        let directory = Self.directory()
        let good = try authority.issueTLSServerCertificate(dnsNames: ["localhost"]).write(to: directory, name: "good")
        let other = try authority.issueTLSServerCertificate(dnsNames: ["localhost"]).write(to: directory, name: "other")
        let context = try TLSServerContext(certificateChainFile: good.chain, privateKeyFile: good.key)
        #expect(context.certificateSubject == "/CN=localhost")
        #expect(context.certificateNotAfter > Int64(Date().timeIntervalSince1970) + 2 * 86_400)
        // A bounded session cache, not OpenSSL's 20,480 (~33 MB; stop 34, growth sweep).
        #expect(context.configuredSessionCacheSize == 2048)

        let mismatched = #expect(throws: TLSContextError.self) {
            try TLSServerContext(certificateChainFile: good.chain, privateKeyFile: other.key)
        }
        #expect(mismatched?.input == .privateKey)
        #expect(mismatched?.reason.contains("mismatch") == true || mismatched?.reason.contains("does not match") == true,
                "\(mismatched?.reason ?? "")")

        let garbage = directory + "/garbage.pem"
        try "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n".write(toFile: garbage, atomically: true, encoding: .utf8)
        let notACertificate = #expect(throws: TLSContextError.self) {
            try TLSServerContext(certificateChainFile: garbage, privateKeyFile: good.key)
        }
        #expect(notACertificate?.input == .certificateChain)
        let keyAsCertificate = #expect(throws: TLSContextError.self) {
            try TLSServerContext(certificateChainFile: good.key, privateKeyFile: good.key)
        }
        #expect(keyAsCertificate?.input == .certificateChain)
        let certificateAsKey = #expect(throws: TLSContextError.self) {
            try TLSServerContext(certificateChainFile: good.chain, privateKeyFile: good.chain)
        }
        #expect(certificateAsKey?.input == .privateKey)
        #expect(throws: TLSContextError.self) { try TLSServerContext(certificateChainFile: directory + "/missing.pem", privateKeyFile: good.key) }
    }

    @Test func aClientContextTrustsAFileOrTheSystemStore() throws {
        let authority = try TestCertificateAuthority.generate()
        let directory = Self.directory()
        let files = try authority.issueTLSServerCertificate(dnsNames: ["localhost"]).write(to: directory, name: "server")
        let fromFile = try TLSClientContext(trustedCertificatesFile: files.ca)
        let again = try TLSClientContext(trustedCertificatesFile: files.ca)
        #expect(fromFile.trustIdentity.hasPrefix("sha256:"))
        #expect(fromFile.trustIdentity == again.trustIdentity, "the same roots: pooled connections stay shareable")
        #expect(try TLSClientContext().trustIdentity == "system")
        let refused = #expect(throws: TLSContextError.self) { try TLSClientContext(trustedCertificatesFile: files.key) }
        #expect(refused?.input == .trustedCertificates)
        #expect(throws: TLSContextError.self) { try TLSClientContext(trustedCertificatesFile: directory + "/missing.pem") }
    }
}
