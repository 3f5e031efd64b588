public import AGCrypto

/// Identifiers shared by attestation and assertion verification.
public enum AppAttest {
    /// The App Attest key identifier: SHA-256 of the uncompressed X9.63 public key. The wire
    /// form (`keyId`) is its standard base64.
    public static func keyID(for publicKey: P256.PublicKey) -> [UInt8] {
        SHA256.hash(publicKey.x963Representation)
    }

    /// The relying-party ID hash devices put in authenticator data: SHA-256 of `TEAMID.bundle.id`.
    public static func rpIDHash(appID: String) -> [UInt8] {
        SHA256.hash(appID.utf8)
    }
}
