public import AGCrypto
internal import AGFormats

/// Verifies App Attest assertions (the refresh call), following Apple's documented steps.
///
/// Pure: no clock, no storage. The caller supplies the stored key and counter and must store
/// the returned counter with a compare-and-set, so two concurrent assertions carrying the same
/// counter cannot both succeed.
///
/// Order matters for what a refusal proves (`AssertionError.isSignedByStoredKey`): everything
/// an outsider can get wrong is judged up to and including the signature; the RP ID hash and
/// the counter are judged only on bytes the stored key signed.
public enum AssertionVerifier {
    /// Verifies `assertion` (CBOR `{signature, authenticatorData}`) and returns its counter.
    ///
    /// - Parameters:
    ///   - clientDataHash: SHA-256 of the client data (here: of the challenge), 32 bytes.
    ///   - publicKey: the device key stored at attestation.
    ///   - appID: `TEAMID.bundle.id`.
    ///   - previousCounter: the stored counter; the assertion's must be strictly greater.
    public static func verify(assertion: [UInt8], clientDataHash: [UInt8], publicKey: P256.PublicKey,
                              appID: String, previousCounter: UInt32) throws(AssertionError) -> UInt32 {
        try verify(assertion: assertion, clientDataHash: clientDataHash, publicKey: publicKey,
                   rpIDHash: AppAttest.rpIDHash(appID: appID), previousCounter: previousCounter)
    }

    /// The same, with the App ID's RP ID hash (`AppAttest.rpIDHash(appID:)`) computed once by
    /// the caller (the gateway keeps it per tenant) instead of on every assertion.
    public static func verify(assertion: [UInt8], clientDataHash: [UInt8], publicKey: P256.PublicKey,
                              rpIDHash: [UInt8], previousCounter: UInt32) throws(AssertionError) -> UInt32 {
        guard clientDataHash.count == SHA256.byteCount else { throw .invalidClientDataHash }
        let (signature, authenticatorBytes, authenticatorData) = try parse(assertion)

        // The device signs nonce = SHA256(authenticatorData || clientDataHash) with ECDSA-SHA256,
        // so the nonce is hashed once more by the scheme: it is the message, not a prehash.
        let nonce = SHA256.hash(authenticatorBytes, clientDataHash)
        guard publicKey.isValidSignature(derSignature: signature, for: nonce) else {
            // Only a refused signature is parsed on its own, to tell bytes that are no DER
            // signature from a signature that does not verify: one that verifies is well formed
            // (OpenSSL parses it, r and s below the group order fit in 32 bytes).
            throw (try? P256.rawSignature(fromDER: signature)) == nil ? .signatureMalformed : .signatureInvalid
        }

        guard constantTimeEquals(Array(authenticatorData.rpIDHash), rpIDHash) else {
            throw .rpIDHashMismatch
        }
        let counter = authenticatorData.counter
        guard counter > previousCounter else {
            throw .counterNotIncreased(stored: previousCounter, received: counter)
        }
        return counter
    }

    /// The RP ID hash an assertion's authenticator data names, unverified (no key to verify it
    /// with): which app the device made it for, or says it did. Nil when the assertion does not
    /// parse.
    public static func unverifiedRPIDHash(of assertion: [UInt8]) -> [UInt8]? {
        guard let (_, _, authenticatorData) = try? parse(assertion) else { return nil }
        return Array(authenticatorData.rpIDHash)
    }

    /// The assertion's signature and authenticator data (raw and parsed).
    private static func parse(_ assertion: [UInt8]) throws(AssertionError)
        -> (signature: [UInt8], authenticatorBytes: [UInt8], authenticatorData: AuthenticatorData) {
        let fields = if let read = devicePattern(assertion) { read } else { try decodedFields(assertion) }
        let (signature, authenticatorBytes) = fields
        do {
            return (signature, authenticatorBytes, try AuthenticatorData(authenticatorBytes))
        } catch {
            throw .authenticatorDataTooShort
        }
    }

    /// The two byte strings through the general CBOR decoder.
    private static func decodedFields(_ assertion: [UInt8]) throws(AssertionError) -> (signature: [UInt8], authenticatorData: [UInt8]) {
        let object: CBORValue
        do {
            object = try CBORDecoder(maximumDepth: 4).decode(assertion)
        } catch {
            throw .malformedAssertion("assertion is not valid CBOR: \(error)")
        }
        guard let signature = object["signature"]?.bytesValue else {
            throw .malformedAssertion("assertion has no signature byte string")
        }
        guard let authenticatorBytes = object["authenticatorData"]?.bytesValue else {
            throw .malformedAssertion("assertion has no authenticatorData byte string")
        }
        return (signature, authenticatorBytes)
    }

    private static let signatureKey: [UInt8] = [0x69] + Array("signature".utf8)
    private static let authenticatorDataKey: [UInt8] = [0x71] + Array("authenticatorData".utf8)

    /// The two byte strings of an assertion laid out as devices send it — a map of two entries,
    /// `signature` then `authenticatorData`, each a byte string under 256 bytes in its
    /// shortest length form, and nothing after — read without the general decoder (whose
    /// values and duplicate-key set cost a dozen allocations per refresh). Anything else
    /// (another order, longer strings, trailing bytes) is nil here and left to `CBORDecoder`,
    /// which accepts everything this accepts, with the same result.
    static func devicePattern(_ assertion: [UInt8]) -> (signature: [UInt8], authenticatorData: [UInt8])? {
        assertion.withUnsafeBufferPointer { bytes -> ([UInt8], [UInt8])? in
            var at = 0
            func expect(_ literal: [UInt8]) -> Bool {
                guard bytes.count - at >= literal.count else { return false }
                for byte in literal {
                    guard bytes[at] == byte else { return false }
                    at += 1
                }
                return true
            }
            func byteString() -> [UInt8]? {
                guard at < bytes.count else { return nil }
                let head = bytes[at]
                var length: Int
                if head >= 0x40 && head < 0x58 {
                    length = Int(head - 0x40)
                    at += 1
                } else if head == 0x58, at + 1 < bytes.count, bytes[at + 1] >= 24 {
                    length = Int(bytes[at + 1])
                    at += 2
                } else {
                    return nil
                }
                guard bytes.count - at >= length else { return nil }
                defer { at += length }
                return Array(bytes[at..<(at + length)])
            }
            guard expect([0xA2]), expect(signatureKey), let signature = byteString(),
                  expect(authenticatorDataKey), let authenticatorData = byteString(), at == bytes.count else { return nil }
            return (signature, authenticatorData)
        }
    }
}
