import AGCrypto
import AGFormats
import AGPlatformSSO

/// The body of `PUT …/psso/devices/{kid}`: `{"signingKey", "encryptionKey", "user": {"sub",
/// "claims"?}}`, keys in any form `DeviceKeyParser` reads. Every refusal is a 400:
/// `bad_request` (not that object), `key_invalid`, `key_id_mismatch` (the path's kid is not the
/// signing key's), `user_invalid`.
enum PlatformSSORegistrationBody {
    static let members: Set<String> = ["signingKey", "encryptionKey", "user"]
    static let userMembers: Set<String> = ["sub", "claims"]

    static func parse(_ body: [UInt8], tenant: Tenant, keyID: PlatformSSOKeyID) throws(GatewayError) -> PlatformSSODeviceRegistration {
        guard case .object(let fields)? = try? JSONValue(parsing: body, maximumDepth: 16) else {
            throw .badRequest("the body must be a JSON object with signingKey, encryptionKey and user")
        }
        if let unknown = fields.keys.sorted().first(where: { !members.contains($0) }) {
            throw .badRequest("unknown member \(unknown); expected signingKey, encryptionKey and user")
        }
        let signingKey = try key(fields, "signingKey")
        let encryptionKey = try key(fields, "encryptionKey")
        let keys = PlatformSSODeviceKeys(signingKey: signingKey, encryptionKey: encryptionKey)
        guard keys.keyID == keyID else {
            throw GatewayError(status: 400, code: "key_id_mismatch",
                               message: "the kid in the path is not the id of signingKey (base64url SHA-256 of its X9.63 form)",
                               hint: "signingKey has kid \(keys.keyID.urlSafe)")
        }
        return PlatformSSODeviceRegistration(tenant: tenant, keys: keys, user: try user(fields["user"]))
    }

    private static func key(_ fields: [String: JSONValue], _ name: String) throws(GatewayError) -> P256.PublicKey {
        guard let value = fields[name] else { throw .badRequest("missing member \(name)") }
        do {
            return try DeviceKeyParser.parse(value)
        } catch {
            throw GatewayError(status: 400, code: "key_invalid", message: "\(name): \(error.reason)")
        }
    }

    private static func user(_ value: JSONValue?) throws(GatewayError) -> PlatformSSOUser {
        func invalid(_ message: String) -> GatewayError { GatewayError(status: 400, code: "user_invalid", message: message) }
        guard let value else { throw .badRequest("missing member user") }
        guard case .object(let members) = value else { throw invalid("user must be an object with sub and claims") }
        if let unknown = members.keys.sorted().first(where: { !userMembers.contains($0) }) {
            throw invalid("unknown member user.\(unknown); expected sub and claims")
        }
        guard case .string(let subject)? = members["sub"] else { throw invalid("user.sub must be a string") }
        var claims: [String: JSONValue] = [:]
        switch members["claims"] {
        case nil, .null?: break
        case .object(let object)?: claims = object
        default: throw invalid("user.claims must be an object")
        }
        do {
            return try PlatformSSOUser(subject: subject, claims: claims)
        } catch {
            throw invalid("user: \(error.reason)")
        }
    }
}
