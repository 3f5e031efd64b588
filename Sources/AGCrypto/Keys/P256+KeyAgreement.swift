internal import COpenSSL

extension P256.PrivateKey {
    /// The ECDH shared secret `Z` with `publicKeyShare` (SP 800-56A: the `x` coordinate of
    /// `d·Q`, 32 bytes). Use it only as input to a KDF, never as a key.
    ///
    public func sharedSecretFromKeyAgreement(with publicKeyShare: P256.PublicKey) throws(CryptoError) -> [UInt8] {
        try key.deriveSharedSecret(peer: publicKeyShare.key, operation: "P256.PrivateKey.sharedSecretFromKeyAgreement(with:)")
    }
}

extension EVPKey {
    /// `EVP_PKEY_derive` between this private key and `peer`.
    ///
    /// One `EVP_PKEY_CTX` per call, because the serving side uses a fresh ephemeral private key
    /// per response; a device that derives with one static key many times could keep the
    /// context and only swap the peer (`EVP_PKEY_derive_set_peer` again).
    func deriveSharedSecret(peer: EVPKey, operation: String) throws(CryptoError) -> [UInt8] {
        guard let context = EVP_PKEY_CTX_new_from_pkey(nil, pointer, nil) else { throw .openSSL(operation) }
        defer { EVP_PKEY_CTX_free(context) }
        // No second validation of the peer (the 0): every P256.PublicKey was checked to be on
        // the curve when it was built, and P-256 has cofactor 1, so that is the whole check.
        guard EVP_PKEY_derive_init(context) == 1, EVP_PKEY_derive_set_peer_ex(context, peer.pointer, 0) == 1 else {
            throw .openSSL(operation)
        }
        var length = 0
        guard EVP_PKEY_derive(context, nil, &length) == 1, length > 0 else { throw .openSSL(operation) }
        var secret = [UInt8](repeating: 0, count: length)
        let derived = secret.withUnsafeMutableBufferPointer { buffer in
            EVP_PKEY_derive(context, buffer.baseAddress, &length)
        }
        guard derived == 1 else { throw .openSSL(operation) }
        secret.removeSubrange(length...)
        return secret
    }
}
