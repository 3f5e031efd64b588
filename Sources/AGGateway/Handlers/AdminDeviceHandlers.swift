import AGPolicy
import AGAppAttest
import AGCrypto
import AGFormats
import AGHTTP
import Foundation

/// Admin calls on one tenant's devices, subjects and usage (DESIGN section 8).
enum AdminDeviceHandlers {
    /// `{keyId}` in a path: base64url or standard base64 (with `%2B`/`%2F`/`%3D`), padded or
    /// not; returns the standard base64 form used in Redis keys.
    static func canonicalKeyID(_ text: Substring) -> String? {
        let unescaped = text.replacingOccurrences(of: "%2B", with: "+").replacingOccurrences(of: "%2F", with: "/")
            .replacingOccurrences(of: "%2b", with: "+").replacingOccurrences(of: "%2f", with: "/")
            .replacingOccurrences(of: "%3D", with: "=").replacingOccurrences(of: "%3d", with: "=")
        guard let bytes = Base64.decodeEitherAlphabet(unescaped), bytes.count == 32 else { return nil }
        return Base64.encode(bytes)
    }

    static let keyIDInvalid = GatewayError(status: 400, code: "key_id_invalid",
                                           message: "keyId must be the base64 SHA-256 of the device's public key")

    /// `PUT …/keys/{keyId}` `{"publicKey": PEM or base64 X9.63, "counter"?: 0, "environment"?}`;
    /// any other member is refused (a misspelt `environment` would otherwise be dropped unsaid).
    static func importKey(_ context: RequestContext, tenant: Tenant, keyID: String) {
        context.collectAdminBody { body in
            guard case .object(let fields)? = try? JSONValue(parsing: body), case .string(let keyText)? = fields["publicKey"] else {
                context.fail(.badRequest("body must be a JSON object with publicKey"))
                return
            }
            if let unknown = fields.keys.sorted().first(where: { !["publicKey", "counter", "environment"].contains($0) }) {
                context.fail(.badRequest("unknown member \(unknown); expected publicKey, counter and environment"))
                return
            }
            let publicKey: P256.PublicKey
            if keyText.contains("BEGIN PUBLIC KEY"), let key = try? P256.PublicKey(pemRepresentation: keyText) {
                publicKey = key
            } else if let bytes = Base64.decode(keyText), let key = try? P256.PublicKey(x963Representation: bytes) {
                publicKey = key
            } else {
                context.fail(.badRequest("publicKey must be a P-256 public key as PEM or base64 X9.63"))
                return
            }
            guard Base64.encode(AppAttest.keyID(for: publicKey)) == keyID else {
                context.fail(keyIDInvalid)
                return
            }
            var counter: Int64 = 0
            switch fields["counter"] {
            case nil: break
            case .integer(let value)? where value >= 0 && value <= Int64(UInt32.max): counter = value
            default:
                context.fail(.badRequest("counter must be an integer from 0 to \(UInt32.max)"))
                return
            }
            var environment = tenant.config.environment.rawValue
            switch fields["environment"] {
            case nil: break
            case .string(let value)? where AppAttestEnvironment(rawValue: value) != nil: environment = value
            default:
                context.fail(.badRequest("environment must be development or production"))
                return
            }
            let imported = ImportedDeviceKey(tenant: tenant, keyID: keyID, publicKey: publicKey.x963Representation,
                                             counter: UInt32(counter), environment: environment)
            context.services.deviceAdmin.importKey(imported) { result in
                if case .failure(let error) = result { return context.storeFailed(error) }
                context.services.logger.info("device key imported", [("tenant", .string(tenant.appID)), ("keyId", .string(keyID))])
                var json = JSONObjectWriter()
                json.add("keyId", keyID)
                json.add("counter", Int(counter))
                json.add("environment", environment)
                json.add("revoked", false)
                context.respond(status: 200, json: json.finished())
            }
        }
    }

    /// `GET …/keys/{keyId}`: the device record, without anything secret.
    static func readKey(_ context: RequestContext, tenant: Tenant, keyID: String) {
        context.services.deviceAdmin.read(tenant: tenant, keyID: keyID) { result in
            switch result {
            case .failure(let error):
                context.storeFailed(error)
            case .success(nil):
                context.fail(GatewayError(status: 404, code: "not_found", message: "no device with this key id"))
            case .success(let record?):
                var json = JSONObjectWriter()
                json.add("keyId", keyID)
                json.add("publicKey", record.publicKey)
                json.add("counter", record.counter)
                json.add("revoked", record.revoked)
                json.add("environment", record.environment)
                json.add("subjectId", record.subjectID)
                if let created = record.createdMilliseconds {
                    json.add("createdAt", UTCDateTime(unixMilliseconds: created).iso8601())
                }
                if let seen = record.lastSeenMilliseconds {
                    json.add("lastSeenAt", UTCDateTime(unixMilliseconds: seen).iso8601())
                }
                context.respond(status: 200, json: json.finished())
            }
        }
    }

    /// `POST …/keys/{keyId}/revoke`.
    static func revoke(_ context: RequestContext, tenant: Tenant, keyID: String) {
        context.services.deviceAdmin.revoke(tenant: tenant, keyID: keyID) { result in
            switch result {
            case .failure(let error):
                context.storeFailed(error)
            case .success(false):
                context.fail(GatewayError(status: 404, code: "not_found", message: "no device with this key id"))
            case .success(true):
                context.services.logger.info("device revoked", [("tenant", .string(tenant.appID)), ("keyId", .string(keyID))])
                var json = JSONObjectWriter()
                json.add("keyId", keyID)
                json.add("revoked", true)
                context.respond(status: 200, json: json.finished())
            }
        }
    }

    /// The largest subscription, serialized: every token of the subject carries it, in the
    /// `Authorization` field of each request (a head is at most 16 KiB here, and 8 KiB per
    /// line by nginx's default) and in `X-Attest-Claims` to the upstream.
    static let maximumSubscriptionBytes = 4096

    /// `PUT …/subjects/{subjectId}/subscription`: any JSON object, carried in the next tokens;
    /// members without a value (null) are left out, as tokens omit them. Refused: JSON that
    /// does not parse (with the parser's reason), a number a double cannot hold as written (not
    /// a 64-bit integer, magnitude 2^53 or more: `containsInexactNumber`), and an object over
    /// `maximumSubscriptionBytes` serialized.
    static func setSubscription(_ context: RequestContext, tenant: Tenant, subjectID: Substring) {
        guard let uuid = UUID(uuidString: String(subjectID)) else {
            context.fail(.badRequest("subjectId must be a UUID"))
            return
        }
        context.collectAdminBody { body in
            let value: JSONValue
            do { value = try JSONValue(parsing: body) } catch {
                context.fail(.badRequest("the subscription is not JSON: \(error)"))
                return
            }
            guard case .object = value else {
                context.fail(.badRequest("the subscription must be a JSON object"))
                return
            }
            guard !value.containsInexactNumber else {
                context.fail(.badRequest("the subscription has a number beyond 2^53 that is not a 64-bit integer, which would not stay as written; send it as a string"))
                return
            }
            let json = value.withoutNullMembers.serializedString()
            guard json.utf8.count <= maximumSubscriptionBytes else {
                context.fail(.badRequest("the subscription is \(json.utf8.count) bytes serialized; at most \(maximumSubscriptionBytes) (every token carries it in request heads)"))
                return
            }
            context.services.deviceAdmin.setSubscription(tenant: tenant, subjectID: uuid.uuidString.lowercased(), json: json) { result in
                if case .failure(let error) = result { return context.storeFailed(error) }
                context.respond(status: 200, json: "{\"subjectId\":\"\(uuid.uuidString.lowercased())\",\"subscription\":\(json)}")
            }
        }
    }

    /// `GET …/usage`: monthly active devices, limit and grace state for the current month.
    static func usage(_ context: RequestContext, tenant: Tenant) {
        let tier = context.effectiveTier(tenant)
        let grace = context.snapshot.gateway.quotas.grace
        context.services.deviceAdmin.usage(tenant: tenant) { result in
            guard case .success(let usage) = result else {
                if case .failure(let error) = result { context.storeFailed(error) }
                return
            }
            var json = JSONObjectWriter()
            json.add("month", usage.shownMonth)
            json.add("tier", tier.name)
            json.add("activeDevices", usage.activeDevices)
            // A grace period counts only while the tenant is at or over its limit: one that
            // started at a lower limit (raised since) is over, whatever its key still says.
            var atLimit = false
            switch tier.madLimit {
            case .limited(let limit):
                json.add("limit", limit)
                atLimit = usage.activeDevices >= limit
            case .unlimited:
                json.add("limit", "unlimited")
            }
            if atLimit, let started = usage.graceStartedMilliseconds {
                let ends = started + grace.milliseconds
                let now = context.services.time.nowMilliseconds
                json.add("graceStartedAt", UTCDateTime(unixMilliseconds: started).iso8601())
                json.add("graceEndsAt", UTCDateTime(unixMilliseconds: ends).iso8601())
                json.add("inGrace", now <= ends)
                json.add("exceeded", now > ends)
            } else {
                json.add("inGrace", false)
                json.add("exceeded", false)
            }
            context.respond(status: 200, json: json.finished())
        }
    }
}

private extension JSONValue {
    /// Whether a number somewhere in it was read as a double of magnitude 2^53 or more: past
    /// that, doubles are not every integer, so the literal may not be what is stored
    /// (`12345678901234567890123` → `1.2345678901234568e+22`, `-9223372036854775809` →
    /// `-9223372036854775808`, `9007199254740993.0` → `9007199254740992`). Integers that fit
    /// in 64 bits stay exact (`.integer`).
    var containsInexactNumber: Bool {
        switch self {
        case .double(let number): number.magnitude >= 9_007_199_254_740_992
        case .array(let items): items.contains { $0.containsInexactNumber }
        case .object(let members): members.values.contains { $0.containsInexactNumber }
        default: false
        }
    }
}
