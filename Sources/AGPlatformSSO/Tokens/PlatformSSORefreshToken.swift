public import AGCrypto
internal import AGFormats

/// An opaque Platform SSO refresh token (DESIGN section 11 "Refresh tokens"): base64url of a
/// 16-byte family id followed by a 32-byte secret, 64 characters.
///
/// The family id rides in the token so that the store can name every key its refresh script
/// touches before running it (one cluster slot, all keys declared); it is an identifier, not a
/// secret. The 256-bit secret makes the token unguessable. Only `digest` is ever stored.
public struct PlatformSSORefreshToken: Sendable, Equatable, CustomStringConvertible {
    public static let familyIDByteCount = 16
    public static let secretByteCount = 32
    /// base64url length of the whole token.
    public static let textLength = 64

    /// What the Mac stores and presents.
    public let text: String
    /// The family, base64url of its 16 bytes (22 characters).
    public let familyID: String
    /// SHA-256 of `text`, base64url (43 characters): the stored form.
    public let digest: String

    private init(familyBytes: [UInt8], secret: [UInt8]) {
        text = Base64.encodeURL(familyBytes + secret)
        familyID = Base64.encodeURL(familyBytes)
        digest = Base64.encodeURL(SHA256.hash(Array(text.utf8)))
    }

    /// The first token of a new family (random family id), from OpenSSL's DRBG or, on the
    /// serving path, the worker's block of it.
    public static func newFamily(using random: SecureRandomBuffer? = nil) -> PlatformSSORefreshToken {
        PlatformSSORefreshToken(familyBytes: randomBytes(familyIDByteCount, random), secret: randomBytes(secretByteCount, random))
    }

    /// A new token of the same family as `self`.
    public func successor(using random: SecureRandomBuffer? = nil) -> PlatformSSORefreshToken {
        PlatformSSORefreshToken(familyBytes: Base64.decodeURL(familyID) ?? [], secret: Self.randomBytes(Self.secretByteCount, random))
    }

    private static func randomBytes(_ count: Int, _ random: SecureRandomBuffer?) -> [UInt8] {
        random?.bytes(count: count) ?? SecureRandom.bytes(count: count)
    }

    /// A presented token, when it has the shape of one the gateway mints (exact length,
    /// unpadded base64url); anything else cannot be known to the store.
    public init?(presented text: String) {
        guard text.utf8.count == Self.textLength, let bytes = Base64.decodeURL(text),
              bytes.count == Self.familyIDByteCount + Self.secretByteCount else { return nil }
        // 64 base64url characters are exactly 48 bytes: every such text is its own canonical spelling.
        self.init(familyBytes: Array(bytes.prefix(Self.familyIDByteCount)), secret: Array(bytes.suffix(Self.secretByteCount)))
    }

    /// Never the token itself: descriptions end up in logs.
    public var description: String { "refresh token of family \(familyID)" }
}
