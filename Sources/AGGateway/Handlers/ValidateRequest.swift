import AGCrypto
import AGFormats
import Foundation

/// The validated body of `POST /api/v1/attestation/validate`. Every check that needs no state
/// happens here, so a malformed request is refused before Redis and spends nothing.
struct ValidateRequest {
    /// Standard base64 of the 32-byte key id (the form Redis keys carry).
    let keyID: String
    let keyIDBytes: [UInt8]
    /// The attestation object, checked to be CBOR of the App Attest shape (not yet verified).
    let attestationObject: [UInt8]
    let clientDataHash: [UInt8]
    let challenge: String
    /// Lower-case UUID, when the device is to be linked to a subject.
    let subjectID: String?

    init(body: [UInt8]) throws(GatewayError) {
        let fields = try AttestationRequestFields(body: body)
        let keyIDText = try fields.string("keyId")
        let objectText = try fields.string("attestationObject")
        let hashText = try fields.string("clientDataHash")
        challenge = try fields.challenge()
        subjectID = try fields.subjectID()

        guard let keyIDBytes = AttestationRequestFields.keyIDBytes(keyIDText) else {
            throw ValidateError.keyIDInvalid
        }
        self.keyIDBytes = keyIDBytes
        keyID = Base64.encode(keyIDBytes)

        guard let object = Base64.decode(objectText) else {
            throw ValidateError.attestationObjectInvalid("attestationObject is not valid base64")
        }
        try Self.checkShape(object)
        attestationObject = object

        guard let hash = Base64.decode(hashText), hash.count == SHA256.byteCount else {
            throw ValidateError.clientDataHashInvalid("clientDataHash is not the base64 of a SHA-256 hash")
        }
        guard constantTimeEquals(SHA256.hash(Array(challenge.utf8)), hash) else {
            throw ValidateError.clientDataHashInvalid("clientDataHash is not the SHA-256 of the challenge")
        }
        clientDataHash = hash
    }

    /// CBOR `{fmt: "apple-appattest", attStmt: {x5c: [bytes, bytes, …], receipt: bytes}, authData: bytes}`.
    private static func checkShape(_ object: [UInt8]) throws(GatewayError) {
        guard let value = try? CBORDecoder(maximumDepth: 6).decode(object) else {
            throw ValidateError.attestationObjectInvalid("attestationObject is not valid CBOR")
        }
        guard value["fmt"]?.textValue == "apple-appattest" else {
            throw ValidateError.attestationObjectInvalid("attestationObject fmt is not apple-appattest")
        }
        guard let statement = value["attStmt"], let chain = statement["x5c"]?.arrayValue, chain.count >= 2,
              chain.allSatisfy({ $0.bytesValue != nil }), statement["receipt"]?.bytesValue != nil else {
            throw ValidateError.attestationObjectInvalid("attestationObject attStmt must hold x5c (leaf and intermediate) and receipt")
        }
        guard let authData = value["authData"]?.bytesValue, authData.count >= 55 else {
            throw ValidateError.attestationObjectInvalid("attestationObject authData is missing or too short")
        }
    }
}

/// The validate endpoint's own contract errors (the challenge and quota ones are shared with refresh).
enum ValidateError {
    static let keyIDInvalid = GatewayError(status: 400, code: "key_id_invalid", message: "keyId is not the base64 of a 32-byte key id")

    static func attestationObjectInvalid(_ message: String) -> GatewayError {
        GatewayError(status: 400, code: "attestation_object_invalid", message: message)
    }

    static func clientDataHashInvalid(_ message: String) -> GatewayError {
        GatewayError(status: 400, code: "client_data_hash_invalid", message: message)
    }

    static let appleValidationFailed = GatewayError(
        status: 401, code: "apple_validation_failed", message: "the attestation did not verify",
        hint: "generate a new key, fetch a new challenge and attest again").challenging()
}
