/// Why an App Attest assertion was refused, in two kinds that call for different answers.
///
/// An *unauthenticated* refusal (`isSignedByStoredKey == false`) concerns bytes the stored key
/// never signed: anyone who knows a keyId can send them, so they prove nothing about the device
/// and must not change its record. An *authenticated* refusal concerns an assertion whose
/// signature verifies with the stored key yet is wrong (another app's RP ID hash, a counter
/// that did not increase): the key itself produced it, so the stored attestation can no longer
/// be trusted.
public enum AssertionError: Error, Sendable, Equatable {
    // Unauthenticated: judged before, or by, the signature check.

    /// `clientDataHash` is not 32 bytes.
    case invalidClientDataHash
    /// The assertion is not CBOR, not a map, or lacks `signature` / `authenticatorData` byte strings.
    case malformedAssertion(String)
    /// The authenticator data is shorter than its 37 fixed bytes.
    case authenticatorDataTooShort
    /// The signature is not a DER `ECDSA-Sig-Value`.
    case signatureMalformed
    /// A well-formed signature that does not verify with the stored key over the nonce.
    case signatureInvalid

    // Authenticated: the signature verified with the stored key.

    /// The RP ID hash is not SHA-256 of the App ID (a key of this device used for another app).
    case rpIDHashMismatch
    /// The counter is not greater than the stored one (a replayed or cloned key).
    case counterNotIncreased(stored: UInt32, received: UInt32)

    /// Whether the stored key signed the refused assertion: only then does the refusal say
    /// anything about the device (and justify invalidating its attestation).
    public var isSignedByStoredKey: Bool {
        switch self {
        case .invalidClientDataHash, .malformedAssertion, .authenticatorDataTooShort, .signatureMalformed, .signatureInvalid:
            false
        case .rpIDHashMismatch, .counterNotIncreased:
            true
        }
    }

    /// A stable, secret-free label for logs and metrics.
    public var reason: String {
        switch self {
        case .invalidClientDataHash: "client_data_hash_invalid"
        case .malformedAssertion: "assertion_malformed"
        case .authenticatorDataTooShort: "authenticator_data_too_short"
        case .signatureMalformed: "signature_malformed"
        case .signatureInvalid: "signature_invalid"
        case .rpIDHashMismatch: "rp_id_hash_mismatch"
        case .counterNotIncreased: "counter_not_increased"
        }
    }
}
