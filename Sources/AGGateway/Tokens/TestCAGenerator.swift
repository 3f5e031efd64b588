import AGConfig
import AGCrypto
import Foundation

/// Writes a new test App Attestation CA (`attestgate test-ca --out DIR`): `test-ca.pem` (the
/// certificate, for `app_attest.test_ca`) and `test-ca-key.pem` (its key, owner-only, for the
/// device simulator's `attest`).
public enum TestCAGenerator {
    public static let certificateFile = "test-ca.pem"
    public static let keyFile = "test-ca-key.pem"

    /// Generates the CA and writes both files; refuses to overwrite either.
    /// - Returns: the paths written (certificate, key).
    @discardableResult
    public static func generate(directory: String, validDays: Int = 365) throws(SigningKeyGenerator.Failure) -> (certificate: String, key: String) {
        let certificatePath = (directory as NSString).appendingPathComponent(certificateFile)
        let keyPath = (directory as NSString).appendingPathComponent(keyFile)
        for path in [certificatePath, keyPath] where FileManager.default.fileExists(atPath: path) {
            throw .exists(path)
        }
        let certificatePEM: String
        let keyPEM: String
        do {
            let authority = try TestCertificateAuthority.generate(validDays: validDays)
            certificatePEM = authority.certificate.pemRepresentation
            keyPEM = try authority.privateKey.pemRepresentation()
        } catch {
            throw .crypto(String(describing: error))
        }
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
        } catch {
            throw .write(directory, error.localizedDescription)
        }
        guard FileManager.default.createFile(atPath: keyPath, contents: Data(keyPEM.utf8), attributes: [.posixPermissions: 0o600]) else {
            throw .write(keyPath, "create failed")
        }
        guard FileManager.default.createFile(atPath: certificatePath, contents: Data(certificatePEM.utf8),
                                             attributes: [.posixPermissions: 0o644]) else {
            throw .write(certificatePath, "create failed")
        }
        return (certificatePath, keyPath)
    }
}
