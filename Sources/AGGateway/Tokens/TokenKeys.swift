import AGConfig
import AGCrypto
import AGFormats
import AGJOSE
import Foundation

/// The token keys of one snapshot: the active signer, a verifier for every configured key, and
/// the JWKS document, parsed once when the snapshot is built.
final class TokenKeys: Sendable {
    let signer: JWTSigner
    let verifier: JWTVerifier
    /// `/.well-known/jwks.json`, rendered once.
    let jwksBody: [UInt8]

    init(_ config: TokenConfig) throws(ConfigError) {
        var problems: [ConfigProblem] = []
        var signer: JWTSigner?
        var verificationKeys: [(keyID: String, key: JWSVerificationKey)] = []
        for (index, keyConfig) in config.keys.enumerated() {
            let problem = { (message: String) in keyConfig.location.problem("key file \"\(keyConfig.file)\": \(message)") }
            guard let data = FileManager.default.contents(atPath: keyConfig.file) else {
                problems.append(problem("cannot be read"))
                continue
            }
            let pem = String(decoding: data, as: UTF8.self)
            let signingKey: JWSSigningKey
            do {
                switch keyConfig.algorithm {
                case .es256: signingKey = .es256(try P256.PrivateKey(pemRepresentation: pem))
                case .rs256: signingKey = .rs256(try RSAKey.PrivateKey(pemRepresentation: pem))
                }
            } catch {
                // OpenSSL's decoder error says nothing an operator can act on; the algorithm does.
                problems.append(problem("not a PEM private key for \(keyConfig.algorithm.rawValue)"))
                continue
            }
            verificationKeys.append((keyConfig.kid, signingKey.verificationKey))
            if keyConfig.isActive { signer = JWTSigner(key: signingKey, keyID: keyConfig.kid) }
        }
        guard problems.isEmpty, let signer else { throw ConfigError(problems: problems) }
        self.signer = signer
        // Every key here signs (low-S, `P256.sign`): a high-S twin of one of our tokens is refused.
        var verifier = JWTVerifier(keys: Dictionary(verificationKeys.map { ($0.keyID, $0.key) }, uniquingKeysWith: { a, _ in a }))
        verifier.requiresLowS = true
        self.verifier = verifier
        self.jwksBody = JWKS.document(verificationKeys).serialized()
    }
}
