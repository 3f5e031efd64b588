import AGFormats
import Foundation

/// The validated body of `POST /api/v1/attestation/refresh`.
struct RefreshRequest {
    /// Standard base64 of the 32-byte key id (the form App Attest uses and Redis keys carry).
    let keyID: String
    let assertion: [UInt8]
    let clientDataHash: [UInt8]
    let challenge: String
    /// Lower-case UUID, when the device is to be linked to a subject.
    let subjectID: String?

    init(body: [UInt8]) throws(GatewayError) {
        guard let json = try? JSONValue(parsing: body), case .object(let fields) = json else {
            throw .badRequest("the body must be a JSON object")
        }
        func string(_ name: String) throws(GatewayError) -> String {
            guard let value = fields[name] else { throw .badRequest("missing field \(name)") }
            guard case .string(let text) = value, !text.isEmpty else { throw .badRequest("\(name) must be a non-empty string") }
            return text
        }
        let keyIDText = try string("keyId")
        guard let keyIDBytes = Base64.decode(keyIDText) ?? Base64.decodeURL(keyIDText), keyIDBytes.count == 32 else {
            throw .badRequest("keyId is not the base64 of a 32-byte key id")
        }
        keyID = Base64.encode(keyIDBytes)
        guard let assertion = Base64.decode(try string("assertion")) else { throw .badRequest("assertion is not valid base64") }
        self.assertion = assertion
        guard let hash = Base64.decode(try string("clientDataHash")) else { throw .badRequest("clientDataHash is not valid base64") }
        guard hash.count == 32 else { throw .badRequest("clientDataHash must be a SHA-256 hash (32 bytes)") }
        clientDataHash = hash
        challenge = try string("challenge")
        guard challenge.utf8.count <= 256, challenge.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw .badRequest("challenge is not a challenge issued by this gateway")
        }
        switch fields["subjectId"] {
        case nil, .null?:
            subjectID = nil
        case .string(let text)?:
            guard let uuid = UUID(uuidString: text) else { throw .badRequest("subjectId must be a UUID") }
            subjectID = uuid.uuidString.lowercased()
        default:
            throw .badRequest("subjectId must be a UUID string")
        }
    }
}
