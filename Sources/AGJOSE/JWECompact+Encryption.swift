public import AGFormats
public import AGCrypto

extension JWECompact {
    /// Encrypts `plaintext` to `recipient` as a compact JWE with `alg: ECDH-ES` (direct key
    /// agreement) and `enc: A256GCM`.
    ///
    /// The protected header is `{alg, enc, epk, apu?, apv?, kid?, typ?}` plus `extraHeader`
    /// (which cannot replace those), serialized compactly with sorted keys; its base64url form
    /// is the GCM associated data.
    ///
    /// - Parameters:
    ///   - ephemeralKey: the sender's key for this one message. Pass a fresh `P256.PrivateKey()`
    ///     every time (reusing it ties messages together); a fixed one only reproduces test vectors.
    ///     It is a parameter, not made here, because PartyUInfo may have to contain its public
    ///     point (Platform SSO: `len || "APPLE" || len || epk`).
    ///   - partyUInfo: `apu`, omitted from the header when nil (the KDF then uses an empty value).
    ///   - partyVInfo: `apv`, likewise.
    ///   - iv: 12 bytes; random when nil. Only tests should pass one.
    public static func encrypt(_ plaintext: [UInt8], to recipient: P256.PublicKey, ephemeralKey: P256.PrivateKey,
                               partyUInfo: [UInt8]?, partyVInfo: [UInt8]?, keyID: String?, type: String?,
                               extraHeader: [String: JSONValue] = [:], iv: [UInt8]? = nil) throws(JWEError) -> String {
        var members = extraHeader
        members["alg"] = .string(keyAgreementAlgorithm)
        members["enc"] = .string(contentEncryption)
        members["epk"] = ephemeralKey.publicKey.jwk
        members["apu"] = partyUInfo.map { .string(Base64.encodeURL($0)) }
        members["apv"] = partyVInfo.map { .string(Base64.encodeURL($0)) }
        members["kid"] = keyID.map { .string($0) }
        members["typ"] = type.map { .string($0) }
        members["crit"] = nil
        members["zip"] = nil
        let protectedHeader = Array(Base64.encodeURL(JSONValue.object(members).serialized()).utf8)

        let contentKey = try contentKey(agreeing: ephemeralKey, with: recipient, partyUInfo: partyUInfo ?? [],
                                        partyVInfo: partyVInfo ?? [])
        let iv = iv ?? SecureRandom.bytes(count: AES256GCM.ivByteCount)
        let box: AES256GCM.SealedBox
        do {
            box = try AES256GCM.seal(plaintext, key: contentKey, iv: iv, authenticating: protectedHeader)
        } catch {
            throw .cryptoFailure(error.description)
        }

        var token = protectedHeader
        token.reserveCapacity(protectedHeader.count + (plaintext.count + 28) * 4 / 3 + 8)
        token.append(UInt8(ascii: "."))
        token.append(UInt8(ascii: "."))  // Direct key agreement: the encrypted key is empty.
        token.append(contentsOf: Base64.encodeURL(iv).utf8)
        token.append(UInt8(ascii: "."))
        token.append(contentsOf: Base64.encodeURL(box.ciphertext).utf8)
        token.append(UInt8(ascii: "."))
        token.append(contentsOf: Base64.encodeURL(box.tag).utf8)
        return String(decoding: token, as: UTF8.self)
    }
}
