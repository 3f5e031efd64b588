/// Why an App Attest attestation was refused (assertions have `AssertionError`).
public enum AppAttestError: Error, Sendable, Equatable {
    /// The CBOR could not be decoded or lacks a required member of the right type.
    case malformedObject(String)
    /// `clientDataHash` is not 32 bytes.
    case invalidClientDataHash
    /// Authenticator data shorter than its fixed fields.
    case authenticatorDataTooShort
    /// The RP ID hash is not SHA-256 of the App ID.
    case rpIDHashMismatch
    /// `fmt` is not `apple-appattest`.
    case unsupportedFormat(String)
    /// The x5c chain does not lead to a trusted root at the verification time.
    case certificateChainInvalid(String)
    /// The leaf certificate has no nonce extension, or it is malformed.
    case nonceExtensionInvalid
    /// The nonce in the leaf certificate is not SHA-256(authData || clientDataHash).
    case nonceMismatch
    /// The leaf public key does not hash to the key ID, or is not a P-256 key.
    case keyIDMismatch
    /// An attestation's counter is not zero.
    case counterNotZero(UInt32)
    /// The AAGUID is not the one of the expected environment.
    case aaguidMismatch
    /// The credential ID in the authenticator data is not the key ID.
    case credentialIDMismatch
}
