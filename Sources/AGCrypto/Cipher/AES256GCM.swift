internal import COpenSSL

/// AES-256 in Galois/Counter Mode (SP 800-38D) with a 96-bit IV and a 16-byte tag, as JWE
/// `A256GCM` (RFC 7518 §5.3) uses it.
public enum AES256GCM {
    /// Key length in bytes.
    public static let keyByteCount = 32
    /// IV length in bytes (96 bits, the only length JWE allows for A256GCM).
    public static let ivByteCount = 12
    /// Authentication tag length in bytes.
    public static let tagByteCount = 16

    /// The result of sealing: ciphertext (as long as the plaintext) and its tag.
    public struct SealedBox: Sendable, Equatable {
        public let ciphertext: [UInt8]
        public let tag: [UInt8]

        public init(ciphertext: [UInt8], tag: [UInt8]) {
            self.ciphertext = ciphertext
            self.tag = tag
        }
    }

    /// Encrypts `plaintext` under `key` and `iv`, authenticating `authenticatedData` too.
    ///
    /// Never reuse an IV with the same key: GCM then leaks the XOR of the plaintexts and the
    /// authentication key. JWE uses a fresh content key per message, and a random IV anyway.
    public static func seal(_ plaintext: [UInt8], key: [UInt8], iv: [UInt8],
                            authenticating authenticatedData: [UInt8]) throws(CryptoError) -> SealedBox {
        let operation = "AES256GCM.seal"
        let context = try CipherContext(key: key, iv: iv, encrypting: true, operation: operation)
        try context.addAuthenticatedData(authenticatedData, operation: operation)
        let ciphertext = try context.update(plaintext, operation: operation)
        try context.finish(operation: operation)
        let tag = try context.tag(operation: operation)
        return SealedBox(ciphertext: ciphertext, tag: tag)
    }

    /// Decrypts `box` and checks its tag over the ciphertext and `authenticatedData`; a wrong
    /// key, IV, tag, ciphertext or associated data all fail the same way, and no plaintext is
    /// returned unless the tag verifies.
    public static func open(_ box: SealedBox, key: [UInt8], iv: [UInt8],
                            authenticating authenticatedData: [UInt8]) throws(CryptoError) -> [UInt8] {
        let operation = "AES256GCM.open"
        guard box.tag.count == tagByteCount else { throw .invalidInput(operation, "the tag must be \(tagByteCount) bytes") }
        let context = try CipherContext(key: key, iv: iv, encrypting: false, operation: operation)
        try context.addAuthenticatedData(authenticatedData, operation: operation)
        let plaintext = try context.update(box.ciphertext, operation: operation)
        try context.setExpectedTag(box.tag, operation: operation)
        guard context.finishVerifying() else { throw .invalidInput(operation, "authentication failed") }
        return plaintext
    }
}

/// The AES-256-GCM cipher implementation, fetched from the default provider once per process.
///
/// `@unchecked Sendable` invariant: an `EVP_CIPHER` is immutable after `EVP_CIPHER_fetch` and
/// OpenSSL lets any number of threads initialise contexts from it; it is never freed.
private final class FetchedCipher: @unchecked Sendable {
    let pointer: OpaquePointer?

    init(name: String) { pointer = EVP_CIPHER_fetch(nil, name, nil) }

    /// Fetching explicitly once avoids the implicit fetch `EVP_aes_256_gcm()` costs on every init.
    static let aes256GCM = FetchedCipher(name: "AES-256-GCM")
}

/// One `EVP_CIPHER_CTX` for one message.
private final class CipherContext {
    let pointer: OpaquePointer

    init(key: [UInt8], iv: [UInt8], encrypting: Bool, operation: String) throws(CryptoError) {
        guard key.count == AES256GCM.keyByteCount else { throw .invalidInput(operation, "the key must be 32 bytes") }
        guard iv.count == AES256GCM.ivByteCount else { throw .invalidInput(operation, "the IV must be 12 bytes") }
        guard let cipher = FetchedCipher.aes256GCM.pointer else { throw .openSSL(operation) }
        guard let context = EVP_CIPHER_CTX_new() else { throw .openSSL(operation) }
        pointer = context
        // The default IV length of GCM is the 96 bits required here, so no length parameter is set.
        let initialised = key.withUnsafeBufferPointer { keyBuffer in
            iv.withUnsafeBufferPointer { ivBuffer in
                encrypting
                    ? EVP_EncryptInit_ex2(context, cipher, keyBuffer.baseAddress, ivBuffer.baseAddress, nil)
                    : EVP_DecryptInit_ex2(context, cipher, keyBuffer.baseAddress, ivBuffer.baseAddress, nil)
            }
        }
        guard initialised == 1 else { throw .openSSL(operation) }
    }

    deinit { EVP_CIPHER_CTX_free(pointer) }

    func addAuthenticatedData(_ data: [UInt8], operation: String) throws(CryptoError) {
        guard !data.isEmpty else { return }
        guard data.count <= Int(Int32.max) else { throw .invalidInput(operation, "associated data too large") }
        var written: Int32 = 0
        let ok = withCBytes(data) { base, count in
            EVP_CipherUpdate(pointer, nil, &written, base, Int32(count))
        }
        guard ok == 1 else { throw .openSSL(operation) }
    }

    func update(_ input: [UInt8], operation: String) throws(CryptoError) -> [UInt8] {
        guard !input.isEmpty else { return [] }
        guard input.count <= Int(Int32.max) else { throw .invalidInput(operation, "input too large") }
        var written: Int32 = 0
        var ok: Int32 = 0
        // GCM is a stream mode: the output is exactly as long as the input.
        let output = [UInt8](unsafeUninitializedCapacity: input.count) { buffer, initialized in
            ok = withCBytes(input) { base, count in
                EVP_CipherUpdate(pointer, buffer.baseAddress, &written, base, Int32(count))
            }
            initialized = ok == 1 ? Int(written) : 0
        }
        guard ok == 1, output.count == input.count else { throw .openSSL(operation) }
        return output
    }

    func finish(operation: String) throws(CryptoError) {
        var written: Int32 = 0
        var scratch = [UInt8](repeating: 0, count: 16)
        let ok = scratch.withUnsafeMutableBufferPointer { EVP_CipherFinal_ex(pointer, $0.baseAddress, &written) }
        guard ok == 1, written == 0 else { throw .openSSL(operation) }
    }

    /// Whether the tag set with `setExpectedTag` matched; failures leave the error queue empty.
    func finishVerifying() -> Bool {
        var written: Int32 = 0
        var scratch = [UInt8](repeating: 0, count: 16)
        let ok = scratch.withUnsafeMutableBufferPointer { EVP_CipherFinal_ex(pointer, $0.baseAddress, &written) }
        if ok != 1 { ERR_clear_error() }
        return ok == 1 && written == 0
    }

    func tag(operation: String) throws(CryptoError) -> [UInt8] {
        var tag = [UInt8](repeating: 0, count: AES256GCM.tagByteCount)
        let ok = tag.withUnsafeMutableBytes { buffer in
            EVP_CIPHER_CTX_ctrl(pointer, EVP_CTRL_AEAD_GET_TAG, Int32(buffer.count), buffer.baseAddress)
        }
        guard ok == 1 else { throw .openSSL(operation) }
        return tag
    }

    func setExpectedTag(_ tag: [UInt8], operation: String) throws(CryptoError) {
        var tag = tag
        let ok = tag.withUnsafeMutableBytes { buffer in
            EVP_CIPHER_CTX_ctrl(pointer, EVP_CTRL_AEAD_SET_TAG, Int32(buffer.count), buffer.baseAddress)
        }
        guard ok == 1 else { throw .openSSL(operation) }
    }
}
