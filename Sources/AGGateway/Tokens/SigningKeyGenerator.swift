import AGConfig
import AGPolicy
import AGCrypto
import Foundation

/// Writes new token signing keys (`attestgate keygen`).
public enum SigningKeyGenerator {
    public enum Failure: Error, CustomStringConvertible {
        case exists(String)
        case write(String, String)
        case crypto(String)

        public var description: String {
            switch self {
            case .exists(let path): "\(path) already exists; refusing to overwrite a key or certificate"
            case .write(let path, let why): "cannot write \(path): \(why)"
            case .crypto(let why): "key generation failed: \(why)"
            }
        }
    }

    /// Generates a key for `algorithm` and writes it as PKCS#8 PEM, readable by the owner only.
    public static func generate(algorithm: TokenAlgorithm, path: String) throws(Failure) {
        guard !FileManager.default.fileExists(atPath: path) else { throw .exists(path) }
        let pem: String
        do {
            switch algorithm {
            case .es256: pem = try P256.PrivateKey().pemRepresentation()
            case .rs256: pem = try RSAKey.PrivateKey(bits: 2048).pemRepresentation()
            }
        } catch {
            throw .crypto(String(describing: error))
        }
        do {
            try PrivateFile.write(Array(pem.utf8), to: path, replacing: false)
        } catch {
            throw error.alreadyExists ? .exists(path) : .write(path, error.reason)
        }
    }
}
