public import AGCrypto
internal import Foundation

/// Writes a new test App Attestation CA (`attestgate test-ca --out DIR`): `test-ca.pem` (the
/// certificate, for `app_attest.test_ca`) and `test-ca-key.pem` (its key, owner-only, for the
/// device simulator's `attest`).
public enum TestCAGenerator {
    public static let certificateFile = "test-ca.pem"
    public static let keyFile = "test-ca-key.pem"

    /// Why no CA was written.
    public enum Failure: Error, CustomStringConvertible {
        case file(PrivateFileError)
        case crypto(String)

        public var description: String {
            switch self {
            case .file(let error): error.description
            case .crypto(let why): "test CA generation failed: \(why)"
            }
        }
    }

    /// Generates the CA and writes both files; refuses to overwrite either.
    /// - Returns: the paths written (certificate, key).
    @discardableResult
    public static func generate(directory: String, validDays: Int = 365) throws(Failure) -> (certificate: String, key: String) {
        let certificatePath = (directory as NSString).appendingPathComponent(certificateFile)
        let keyPath = (directory as NSString).appendingPathComponent(keyFile)
        let certificatePEM: String
        let keyPEM: String
        do {
            let authority = try TestCertificateAuthority.generate(validDays: validDays)
            certificatePEM = authority.certificate.pemRepresentation
            keyPEM = try authority.privateKey.pemRepresentation()
        } catch {
            throw .crypto(String(describing: error))
        }
        for path in [certificatePath, keyPath] where FileManager.default.fileExists(atPath: path) {
            throw .file(PrivateFileError(path: path, reason: "exists", alreadyExists: true))
        }
        do throws(PrivateFileError) {
            try PrivateFile.write(Array(keyPEM.utf8), to: keyPath, replacing: false)
            try PrivateFile.write(Array(certificatePEM.utf8), to: certificatePath, replacing: false, mode: 0o644)
        } catch {
            throw .file(error)
        }
        return (certificatePath, keyPath)
    }
}
