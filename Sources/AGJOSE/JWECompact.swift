public import AGFormats
public import AGCrypto

/// The protected header of a JWE, with the members ECDH-ES uses decoded.
public struct JWEHeader: Sendable, Equatable {
    /// `alg` exactly as written (`ECDH-ES` for the only mode supported).
    public let algorithm: String
    /// `enc` exactly as written (`A256GCM`).
    public let encryption: String
    /// `kid`, when present.
    public let keyID: String?
    /// `typ`, when present.
    public let type: String?
    /// `epk`, the sender's ephemeral public key, when present.
    public let ephemeralPublicKey: P256.PublicKey?
    /// `apu` decoded (PartyUInfo), when present.
    public let partyUInfo: [UInt8]?
    /// `apv` decoded (PartyVInfo), when present.
    public let partyVInfo: [UInt8]?
    /// Every header member, including the ones above.
    public let members: [String: JSONValue]

    init(decoding bytes: [UInt8]) throws(JWEError) {
        guard let json = try? JSONValue(parsing: bytes, maximumDepth: 8), case .object(let members) = json else {
            throw .malformed("header is not a JSON object")
        }
        guard let algorithm = members["alg"]?.stringValue else { throw .malformed("header has no alg string") }
        guard let encryption = members["enc"]?.stringValue else { throw .malformed("header has no enc string") }
        guard members["crit"] == nil else { throw .unsupportedHeader("crit") }
        guard members["zip"] == nil else { throw .unsupportedHeader("zip") }
        func string(_ name: String) throws(JWEError) -> String? {
            guard let value = members[name] else { return nil }
            guard let text = value.stringValue else { throw .malformed("\(name) is not a string") }
            return text
        }
        func decoded(_ name: String) throws(JWEError) -> [UInt8]? {
            guard let text = try string(name) else { return nil }
            guard let value = Base64.decodeURL(text) else { throw .malformed("\(name) is not unpadded base64url") }
            return value
        }
        self.algorithm = algorithm
        self.encryption = encryption
        self.keyID = try string("kid")
        self.type = try string("typ")
        self.partyUInfo = try decoded("apu")
        self.partyVInfo = try decoded("apv")
        if let epk = members["epk"] {
            do throws(JOSEError) {
                self.ephemeralPublicKey = try P256.PublicKey(jwk: epk)
            } catch {
                guard case .invalidKey(let reason) = error else { throw .invalidKey("epk is not a P-256 public JWK") }
                throw .invalidKey("epk: " + reason)
            }
        } else {
            self.ephemeralPublicKey = nil
        }
        self.members = members
    }
}

/// A JWE in compact serialization (RFC 7516 §7.1), split and decoded but not yet decrypted.
///
/// Only ECDH-ES direct key agreement with A256GCM content encryption is decrypted (the Platform
/// SSO response); everything else is refused, never guessed.
public struct JWECompact: Sendable {
    /// The JWE algorithm this type implements.
    public static let keyAgreementAlgorithm = "ECDH-ES"
    /// The content encryption this type implements.
    public static let contentEncryption = "A256GCM"

    public let header: JWEHeader
    /// The first segment exactly as received: its ASCII bytes are the GCM associated data.
    public let protectedHeader: [UInt8]
    /// The decoded JWE Encrypted Key (empty for direct key agreement).
    public let encryptedKey: [UInt8]
    public let iv: [UInt8]
    public let ciphertext: [UInt8]
    public let tag: [UInt8]

    /// Splits and decodes `token`: five unpadded base64url segments, a JSON-object header with
    /// `alg` and `enc`, a 96-bit IV and a 128-bit tag. The encrypted key and the ciphertext may
    /// be empty; the header, IV and tag may not.
    public init(parsing token: String, maximumLength: Int = 64 * 1024) throws(JWEError) {
        let utf8 = Array(token.utf8)
        guard utf8.count <= maximumLength else { throw .malformed("token longer than \(maximumLength) bytes") }
        let segments = utf8.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard segments.count == 5 else { throw .malformed("expected five dot-separated segments") }
        guard !segments[0].isEmpty, !segments[2].isEmpty, !segments[4].isEmpty else {
            throw .malformed("empty header, IV or tag segment")
        }
        guard let headerBytes = Base64.decodeURL(utf8: segments[0]),
              let encryptedKey = Base64.decodeURL(utf8: segments[1]),
              let iv = Base64.decodeURL(utf8: segments[2]),
              let ciphertext = Base64.decodeURL(utf8: segments[3]),
              let tag = Base64.decodeURL(utf8: segments[4]) else {
            throw .malformed("segment is not unpadded base64url")
        }
        guard iv.count == AES256GCM.ivByteCount else { throw .malformed("the IV must be 96 bits") }
        guard tag.count == AES256GCM.tagByteCount else { throw .malformed("the tag must be 128 bits") }
        self.header = try JWEHeader(decoding: headerBytes)
        self.protectedHeader = Array(segments[0])
        self.encryptedKey = encryptedKey
        self.iv = iv
        self.ciphertext = ciphertext
        self.tag = tag
    }

    /// Decrypts with the recipient's private key: `Z` = ECDH(key, `epk`), the content key by
    /// Concat KDF over `apu` and the PartyVInfo, then AES-256-GCM with the protected header as
    /// associated data.
    ///
    /// `expectedPartyVInfo` is what the recipient itself asked for (a Mac uses its request's
    /// `apv`; the response header may omit it): when given it is the KDF's PartyVInfo, and a
    /// header `apv` that differs is refused. Without it the header's `apv` (or nothing) is used.
    public func decrypt(with key: P256.PrivateKey, expectedPartyVInfo: [UInt8]? = nil) throws(JWEError) -> [UInt8] {
        guard header.algorithm == Self.keyAgreementAlgorithm else { throw .unsupportedAlgorithm(header.algorithm) }
        guard header.encryption == Self.contentEncryption else { throw .unsupportedAlgorithm(header.encryption) }
        guard encryptedKey.isEmpty else { throw .malformed("direct key agreement has no encrypted key") }
        guard let ephemeral = header.ephemeralPublicKey else { throw .invalidKey("epk is missing") }
        if let expectedPartyVInfo, let headerValue = header.partyVInfo, headerValue != expectedPartyVInfo {
            throw .partyVInfoMismatch
        }
        let contentKey = try Self.contentKey(agreeing: key, with: ephemeral, partyUInfo: header.partyUInfo ?? [],
                                             partyVInfo: expectedPartyVInfo ?? header.partyVInfo ?? [])
        do {
            return try AES256GCM.open(AES256GCM.SealedBox(ciphertext: ciphertext, tag: tag), key: contentKey, iv: iv,
                                      authenticating: protectedHeader)
        } catch {
            throw .decryptionFailed
        }
    }

    /// The A256GCM content key of ECDH-ES direct key agreement between `privateKey` and `publicKey`.
    static func contentKey(agreeing privateKey: P256.PrivateKey, with publicKey: P256.PublicKey,
                           partyUInfo: [UInt8], partyVInfo: [UInt8]) throws(JWEError) -> [UInt8] {
        let sharedSecret: [UInt8]
        do {
            sharedSecret = try privateKey.sharedSecretFromKeyAgreement(with: publicKey)
        } catch {
            throw .cryptoFailure(error.description)
        }
        return ConcatKDF.deriveKey(sharedSecret: sharedSecret, algorithmID: contentEncryption, partyUInfo: partyUInfo,
                                   partyVInfo: partyVInfo, keyBitLength: AES256GCM.keyByteCount * 8)
    }
}
