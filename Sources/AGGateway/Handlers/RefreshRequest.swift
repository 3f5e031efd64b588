import AGConfig
import AGPolicy
import AGCrypto
import AGFormats
import Foundation

/// The validated body of `POST /api/v1/attestation/refresh`: every check that needs no state,
/// so a malformed request is refused before Redis and spends nothing.
struct RefreshRequest {
    /// Standard base64 of the 32-byte key id (the form App Attest uses and Redis keys carry).
    let keyID: String
    let assertion: [UInt8]
    let clientDataHash: [UInt8]
    let challenge: String
    /// Lower-case UUID, when the device is to be linked to a subject.
    let subjectID: String?

    init(body: [UInt8]) throws(GatewayError) {
        let fields = try AttestationRequestFields(body: body)
        guard let keyIDBytes = AttestationRequestFields.keyIDBytes(try fields.string("keyId")) else {
            throw .badRequest("keyId is not the base64 of a 32-byte key id")
        }
        keyID = Base64.encode(keyIDBytes)
        guard let assertion = Base64.decode(try fields.string("assertion")) else { throw .badRequest("assertion is not valid base64") }
        self.assertion = assertion
        guard let hash = Base64.decode(try fields.string("clientDataHash")) else { throw .badRequest("clientDataHash is not valid base64") }
        guard hash.count == 32 else { throw .badRequest("clientDataHash must be a SHA-256 hash (32 bytes)") }
        clientDataHash = hash
        challenge = try fields.challenge()
        guard constantTimeEquals(SHA256.hash(Array(challenge.utf8)), hash) else {
            throw .badRequest("clientDataHash is not the SHA-256 of the challenge")
        }
        subjectID = try fields.subjectID()
    }
}
