public import AGCrypto
internal import AGFormats

/// A Platform SSO key id: SHA-256 of the key's 65-byte X9.63 form, spelled the way macOS sends
/// it in a JWS `kid` (standard base64 with `=` padding, 44 characters).
///
/// IdPs and admin tools also spell it url-safe and without padding; every spelling of the same
/// 32 bytes normalises to one canonical value, which is what device records are stored under.
public struct PlatformSSOKeyID: Sendable, Hashable, CustomStringConvertible {
    /// The 32-byte SHA-256 digest.
    public let digest: [UInt8]

    /// The key id of `key` by Apple's rule.
    public init(of key: P256.PublicKey) {
        digest = SHA256.hash(key.x963Representation)
    }

    /// Accepts the four spellings — standard or url-safe alphabet, with or without padding — of
    /// a 32-byte digest; nil for anything else (other lengths, mixed alphabets, whitespace,
    /// wrong padding, non-canonical trailing bits).
    public init?(normalizing text: some StringProtocol) {
        guard let bytes = Base64.decodeEitherAlphabet(text), bytes.count == SHA256.byteCount else { return nil }
        digest = bytes
    }

    /// Standard base64 with padding: Apple's spelling, used as the stored form.
    public var canonical: String { Base64.encode(digest) }

    /// base64url without padding: the spelling of the admin API's `{kid}` path segment.
    public var urlSafe: String { Base64.encodeURL(digest) }

    public var description: String { canonical }
}
