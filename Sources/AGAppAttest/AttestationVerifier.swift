public import AGCrypto
internal import AGFormats
public import Foundation

/// The App Attest environment a key was created in, told apart by the AAGUID.
public enum AppAttestEnvironment: String, Sendable, Hashable, CaseIterable {
    case development
    case production

    /// AAGUID bytes: `appattestdevelop`, or `appattest` followed by seven zero bytes.
    var aaguid: [UInt8] {
        switch self {
        case .development: Array("appattestdevelop".utf8)
        case .production: Array("appattest".utf8) + [UInt8](repeating: 0, count: 7)
        }
    }
}

/// A device key accepted by attestation, ready to store.
public struct AttestedKey: Sendable, Equatable {
    public let publicKey: P256.PublicKey
    /// SHA-256 of the X9.63 public key (the `keyId`).
    public let keyID: [UInt8]
    /// The attestation receipt (opaque; for Apple's fraud-metric service).
    public let receipt: [UInt8]
    public let environment: AppAttestEnvironment
    /// Always 0 for a fresh attestation.
    public let counter: UInt32
}

/// Verifies App Attest attestations (device onboarding), following Apple's documented steps.
public struct AttestationVerifier: Sendable {
    /// OID of the leaf-certificate extension that carries the nonce.
    public static let nonceExtensionOID = "1.2.840.113635.100.8.2"

    public let trustedRoots: [X509Certificate]
    private let now: @Sendable () -> Date

    /// - Parameters:
    ///   - trustedRoots: the Apple App Attestation Root CA, plus a test CA where configured.
    ///   - now: the clock that decides certificate validity; leaf certificates live about three days.
    public init(trustedRoots: [X509Certificate], now: @escaping @Sendable () -> Date = { Date() }) {
        self.trustedRoots = trustedRoots
        self.now = now
    }

    /// Verifies `attestationObject` (CBOR `{fmt, attStmt: {x5c, receipt}, authData}`) for the
    /// device key `keyID` (raw 32 bytes) of `appID` in `environment`.
    public func verify(attestationObject: [UInt8], clientDataHash: [UInt8], keyID: [UInt8], appID: String,
                       environment: AppAttestEnvironment) throws(AppAttestError) -> AttestedKey {
        guard clientDataHash.count == SHA256.byteCount else { throw .invalidClientDataHash }
        let object: CBORValue
        do {
            object = try CBORDecoder(maximumDepth: 6).decode(attestationObject)
        } catch {
            throw .malformedObject("attestation is not valid CBOR: \(error)")
        }
        guard let format = object["fmt"]?.textValue else { throw .malformedObject("fmt missing") }
        guard format == "apple-appattest" else { throw .unsupportedFormat(format) }
        guard let statement = object["attStmt"],
              let chain = statement["x5c"]?.arrayValue, chain.count >= 2 else {
            throw .malformedObject("attStmt.x5c must hold the leaf and intermediate certificates")
        }
        guard let receipt = statement["receipt"]?.bytesValue else { throw .malformedObject("attStmt.receipt missing") }
        guard let authenticatorBytes = object["authData"]?.bytesValue else { throw .malformedObject("authData missing") }
        let authenticatorData = try AuthenticatorData(authenticatorBytes)

        // 1. The certificate chain leads to a trusted root at the verification time.
        var certificates = [X509Certificate]()
        for element in chain {
            guard let der = element.bytesValue else { throw .malformedObject("x5c element is not a byte string") }
            do {
                certificates.append(try X509Certificate(derRepresentation: der))
            } catch {
                throw .malformedObject("x5c certificate: \(error.reason)")
            }
        }
        let leaf = certificates[0]
        do {
            try leaf.verifyChain(intermediates: Array(certificates.dropFirst()), trustedRoots: trustedRoots, at: now())
        } catch {
            throw .certificateChainInvalid(error.reason)
        }

        // 2–3. The leaf certificate's nonce extension equals SHA256(authData || clientDataHash).
        let nonce = SHA256.hash(authenticatorBytes, clientDataHash)
        let extensionValue: [UInt8]?
        do {
            extensionValue = try leaf.extensionValue(oid: Self.nonceExtensionOID)
        } catch {
            throw .nonceExtensionInvalid
        }
        guard let extensionValue, let certifiedNonce = Self.nonce(fromExtension: extensionValue) else {
            throw .nonceExtensionInvalid
        }
        guard constantTimeEquals(certifiedNonce, nonce) else { throw .nonceMismatch }

        // 4. The leaf's public key is the device key named by keyID.
        let publicKey: P256.PublicKey
        do {
            publicKey = try leaf.p256PublicKey()
        } catch {
            throw .keyIDMismatch
        }
        guard constantTimeEquals(AppAttest.keyID(for: publicKey), keyID) else { throw .keyIDMismatch }

        // 5. RP ID hash and a zero counter.
        guard constantTimeEquals(Array(authenticatorData.rpIDHash), AppAttest.rpIDHash(appID: appID)) else {
            throw .rpIDHashMismatch
        }
        guard authenticatorData.counter == 0 else { throw .counterNotZero(authenticatorData.counter) }

        // 6. The AAGUID names the expected environment.
        guard let aaguid = authenticatorData.aaguid, Array(aaguid) == environment.aaguid else { throw .aaguidMismatch }

        // 7. The credential ID is the key ID.
        guard let credentialID = authenticatorData.credentialID, constantTimeEquals(Array(credentialID), keyID) else {
            throw .credentialIDMismatch
        }
        return AttestedKey(publicKey: publicKey, keyID: keyID, receipt: receipt, environment: environment, counter: 0)
    }

    /// The nonce inside the extension's DER `SEQUENCE { [1] EXPLICIT OCTET STRING }`.
    static func nonce(fromExtension der: [UInt8]) -> [UInt8]? {
        var outer = DERReader(der[...])
        guard let sequence = outer.element(tag: 0x30), outer.isAtEnd else { return nil }
        var members = DERReader(sequence)
        var nonce: [UInt8]?
        while !members.isAtEnd {
            guard let (tag, content) = members.anyElement() else { return nil }
            guard tag == 0xA1 else { continue }
            guard nonce == nil else { return nil }
            var explicit = DERReader(content)
            guard let octets = explicit.element(tag: 0x04), explicit.isAtEnd else { return nil }
            nonce = Array(octets)
        }
        return nonce
    }
}

/// Reads DER TLVs with definite lengths (enough for the App Attest nonce extension).
struct DERReader {
    private var remaining: ArraySlice<UInt8>

    init(_ bytes: ArraySlice<UInt8>) {
        remaining = bytes
    }

    var isAtEnd: Bool { remaining.isEmpty }

    mutating func anyElement() -> (tag: UInt8, content: ArraySlice<UInt8>)? {
        guard remaining.count >= 2 else { return nil }
        let tag = remaining.removeFirst()
        // Multi-byte tags (low bits 0x1F) never occur here; refuse them rather than misread.
        guard tag & 0x1F != 0x1F else { return nil }
        let first = remaining.removeFirst()
        var length: Int
        if first < 0x80 {
            length = Int(first)
        } else {
            let count = Int(first & 0x7F)
            guard count >= 1, count <= 4, remaining.count >= count else { return nil }
            length = 0
            for _ in 0..<count { length = length << 8 | Int(remaining.removeFirst()) }
            guard length >= 0x80 else { return nil }
        }
        guard length <= remaining.count else { return nil }
        let content = remaining.prefix(length)
        remaining = remaining.dropFirst(length)
        return (tag, content)
    }

    mutating func element(tag expected: UInt8) -> ArraySlice<UInt8>? {
        guard let (tag, content) = anyElement(), tag == expected else { return nil }
        return content
    }
}
