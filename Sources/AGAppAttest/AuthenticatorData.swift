/// The fixed fields of WebAuthn-style authenticator data as App Attest uses them.
///
/// Layout: `rpIdHash` (32) · `flags` (1) · `signCount` (4, big-endian), then for attestations
/// the attested credential data: `aaguid` (16) · credential ID length (2, big-endian) · credential ID.
public struct AuthenticatorData: Sendable, Equatable {
    public let bytes: [UInt8]

    /// Accepts anything with at least the 37 fixed bytes; later fields are read on demand so
    /// that extension data appended by newer iOS versions does not cause a rejection.
    public init(_ bytes: [UInt8]) throws(AppAttestError) {
        guard bytes.count >= 37 else { throw .authenticatorDataTooShort }
        self.bytes = bytes
    }

    public var rpIDHash: ArraySlice<UInt8> { bytes[0..<32] }
    public var flags: UInt8 { bytes[32] }
    public var counter: UInt32 {
        bytes[33..<37].reduce(0) { $0 << 8 | UInt32($1) }
    }

    /// The AAGUID, when attested credential data is present.
    public var aaguid: ArraySlice<UInt8>? {
        bytes.count >= 53 ? bytes[37..<53] : nil
    }

    /// The credential ID, when attested credential data is present and complete.
    public var credentialID: ArraySlice<UInt8>? {
        guard bytes.count >= 55 else { return nil }
        let length = Int(bytes[53]) << 8 | Int(bytes[54])
        guard bytes.count >= 55 + length else { return nil }
        return bytes[55..<(55 + length)]
    }
}
