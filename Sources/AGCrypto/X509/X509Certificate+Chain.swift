public import Foundation
internal import COpenSSL

extension X509Certificate {
    /// Verifies that this certificate chains through `intermediates` to one of `trustedRoots`
    /// with every certificate valid at `date` (OpenSSL's default X.509 checks: signatures,
    /// validity periods, basic constraints, critical extensions).
    ///
    /// Throws with the `X509_V_ERR_*` code and OpenSSL's text when the chain is not valid.
    public func verifyChain(intermediates: [X509Certificate], trustedRoots: [X509Certificate],
                            at date: Date) throws(CryptoError) {
        let operation = "X509Certificate.verifyChain"
        guard !trustedRoots.isEmpty else { throw .invalidInput(operation, "no trusted roots") }
        guard let store = X509_STORE_new() else { throw .openSSL(operation) }
        defer { X509_STORE_free(store) }
        for root in trustedRoots {
            // The store takes its own reference to each root.
            guard X509_STORE_add_cert(store, root.pointer) == 1 else { throw .openSSL(operation) }
        }
        guard let untrusted = OPENSSL_sk_new_null() else { throw .openSSL(operation) }
        // The stack borrows the intermediates; `intermediates` keeps them alive until it is freed.
        defer { OPENSSL_sk_free(untrusted) }
        for intermediate in intermediates {
            guard OPENSSL_sk_push(untrusted, UnsafeRawPointer(intermediate.pointer)) > 0 else { throw .openSSL(operation) }
        }
        guard let context = X509_STORE_CTX_new() else { throw .openSSL(operation) }
        defer { X509_STORE_CTX_free(context) }
        guard X509_STORE_CTX_init(context, store, pointer, untrusted) == 1 else { throw .openSSL(operation) }
        X509_STORE_CTX_set_time(context, 0, time_t(date.timeIntervalSince1970.rounded(.down)))
        let verified = withExtendedLifetime((intermediates, trustedRoots)) { X509_verify_cert(context) }
        guard verified == 1 else {
            let code = X509_STORE_CTX_get_error(context)
            let reason = X509_verify_cert_error_string(Int(code)).map { String(cString: $0) } ?? "unknown error"
            ERR_clear_error()
            throw CryptoError(operation: operation, code: UInt(max(code, 0)), reason: reason)
        }
    }
}
